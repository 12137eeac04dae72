// HTTP over libcurl's multi interface: several requests in flight on one
// thread, each job re-sent after a delay its owner chooses (retries with
// backoff), with a cap on concurrent transfers.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ks::llm {

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;                  // sent as a POST
  double timeout_s = 600;            // whole transfer
  double connect_timeout_s = 15;
  std::string proxy;                 // empty: libcurl's default (environment)
  // A longer response body aborts the transfer (body_too_large): a
  // misbehaving or hostile server cannot fill memory. It counts the body as
  // decoded (gzip, brotli, zstd), of any status.
  std::size_t max_body_bytes = std::size_t{16} << 20;
  // Likewise the response headers, all responses of the transfer together
  // (1xx, a proxy's CONNECT answer): headers_too_large. Below libcurl's own
  // 300 KiB (8.3 on, and backported: "Too large response headers", which it
  // reports as a receive error, so it would be retried), which older ones
  // lack; libcurl also refuses a single header line over 100 KiB.
  std::size_t max_header_bytes = std::size_t{256} << 10;
  bool get = false;                  // a GET without a body instead of the POST
};

// The longest status text or request id kept: they are quoted in messages.
inline constexpr std::size_t kMaxHeaderValueChars = 200;

struct HttpResult {
  int curl_code = 0;            // CURLE_OK (0) when a response arrived
  std::string transport_error;  // curl's words when curl_code != 0
  long status = 0;              // HTTP status, 0 when none arrived
  std::string status_text;      // "Too Many Requests" (at most kMaxHeaderValueChars)
  std::string body;
  bool body_too_large = false;
  bool headers_too_large = false;
  std::optional<double> retry_after_s;  // from Retry-After or retry-after-ms
  std::string request_id;               // x-request-id, for support questions (at most kMaxHeaderValueChars)
  double elapsed_s = 0;
};

// How a transport failure (curl_code != 0) should be treated.
enum class TransportFailure {
  transient,  // timeouts, refused or dropped connections, DNS hiccups: retry
  timeout,    // the transfer ran past its time limit: retry
  permanent,  // a bad URL, an unsupported scheme, TLS verification: never works
};
TransportFailure classify_transport(int curl_code);

// The reason phrase of an HTTP status ("Service Unavailable"), or "".
const char* http_reason(long status);

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  struct Hooks {
    // The request for the next attempt of `job`, or nullopt when the job is
    // over without sending (e.g. a budget was reached).
    std::function<std::optional<HttpRequest>(std::size_t job)> next_attempt;
    // Called when an attempt of `job` finished; returns the delay in seconds
    // before the next attempt, or nullopt when the job is done.
    std::function<std::optional<double>(std::size_t job, HttpResult&& result)> finished;
  };

  // Runs jobs 0..jobs-1 (started in order) until every one is done, with at
  // most `max_parallel` transfers in flight. Thread-safe: concurrent calls
  // use separate multi handles, kept for connection reuse. Returns false
  // when abort() ended it: the transfers in flight were dropped and the jobs
  // not finished got no `finished` call.
  bool run(std::size_t jobs, int max_parallel, const Hooks& hooks);

  // From any thread: ends every run() in flight at once, and makes later
  // ones return false without sending anything.
  void abort();
  bool aborted() const { return aborted_.load(); }

 private:
  void* take_multi();
  void give_back(void* multi);

  std::mutex mu_;
  std::vector<void*> idle_;    // CURLM*, kept so later calls reuse connections
  std::vector<void*> in_use_;  // CURLM* of the runs in flight, woken by abort()
  std::atomic<bool> aborted_{false};
};

}  // namespace ks::llm
