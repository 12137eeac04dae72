// A small OpenAI-compatible HTTP/1.1 server for tests and benchmarks. It
// listens on 127.0.0.1 (an ephemeral port by default), answers
// POST .../chat/completions and POST .../responses in the matching shape,
// and takes each request's behaviour from a queue the test scripts: answers
// with usage, 429 with Retry-After, 5xx, delays, dropped connections,
// malformed JSON, truncated and filtered answers, provider errors. It records
// every request it received (headers and body) for the test to inspect.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ksearch/json.hpp"

namespace ks::test {

struct ServerUsage {
  std::int64_t input = 10;
  std::int64_t output = 20;
  std::int64_t reasoning = 0;
  std::int64_t cached = 0;
};

struct Behaviour {
  enum class Kind {
    answer,     // 200 with `text`, `finish_reason` and `usage` in the API's shape
    error,      // `status` with {"error": {"message": error_message, "code": error_code}}
    drop,       // read the request, then close the connection without a word
    malformed,  // 200 with `raw_body` as is
  };
  Kind kind = Kind::answer;
  std::string text;
  std::string finish_reason = "stop";  // "stop", "length", "content_filter"
  ServerUsage usage;
  int status = 200;
  // "{authorization}" is replaced by the request's Authorization header, to
  // imitate providers that echo (part of) the key back.
  std::string error_message;
  std::string error_code;
  std::string retry_after;     // Retry-After header value, sent when not empty
  std::string retry_after_ms;  // retry-after-ms header value, sent when not empty
  std::string raw_body;
  double delay_s = 0;          // wait before answering (or dropping)
  // Held until a condition the test controls, not a time: until this file
  // exists, and until this many requests have been in flight at once. A
  // request held so is let go when the server stops.
  std::string wait_file;
  int wait_in_flight = 0;
  std::string match;           // when set, only a request whose body contains it takes this behaviour
  std::string model;           // "model" in the answer; empty: the request's model
  std::size_t filler_header_bytes = 0;  // about this many bytes of extra "x-filler-N" headers

  static Behaviour answer(std::string text, ServerUsage usage = {});
  static Behaviour slow(double delay_s, std::string text);
  static Behaviour rate_limited(std::string retry_after = "1");
  static Behaviour server_error(int status = 500, std::string message = "internal server error");
  static Behaviour http_error(int status, std::string message, std::string code = {});
  static Behaviour drop();
  static Behaviour malformed(std::string body = "{\"choices\": [{\"message\": ");
  static Behaviour truncated(std::string partial_text);
  static Behaviour content_filter();
  static Behaviour empty_answer();

  // {"kind": "answer" | "truncated" | "content_filter" | "empty" | "error" |
  //  "rate_limited" | "unauthorized" | "drop" | "malformed", "text", ...}:
  // the fields above by name, plus "message" and "code" for errors, "body"
  // for malformed, "usage": {"input", "output", "reasoning", "cached"}.
  // "wait_file" and "wait_in_flight" hold the answer as above.
  static Behaviour from_json(const Json& j);
};

struct ReceivedRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  double t_s = 0;  // when it arrived, seconds since the server started

  std::string header(const std::string& lower_name) const;
  Json json() const;  // the body parsed; null when it is not JSON
};

class OpenAiTestServer {
 public:
  // Binds 127.0.0.1:`port` (0: an ephemeral port) and starts serving.
  explicit OpenAiTestServer(std::uint16_t port = 0);
  // Stops: closes every connection and joins every thread.
  ~OpenAiTestServer();
  OpenAiTestServer(const OpenAiTestServer&) = delete;
  OpenAiTestServer& operator=(const OpenAiTestServer&) = delete;

  std::uint16_t port() const { return port_; }
  std::string base_url() const;  // "http://127.0.0.1:PORT/v1"

  void push(Behaviour b);
  void push(std::vector<Behaviour> bs);
  // Used when no queued behaviour fits. Initially a 400 error saying the
  // script ran out, so an unexpected request fails loudly and is not retried.
  void set_default(Behaviour b);
  // GET .../models lists these ids (none by default) with status 200; another
  // status answers with an error instead (404: a server without the route,
  // 401: one that refuses the key).
  void set_models(std::vector<std::string> ids, int status = 200);
  // Called for every request as it arrives (e.g. to log it).
  void on_request(std::function<void(const ReceivedRequest&)> fn);

  std::vector<ReceivedRequest> requests() const;
  std::size_t request_count() const;
  std::size_t pending() const;  // queued behaviours not used yet
  int max_in_flight() const;    // the most requests being answered at once (arrived, reply not yet sent)
  void stop();

 private:
  void accept_loop();
  void serve(int fd);
  Behaviour take(const std::string& body);
  bool sleep_for(double seconds);  // false when stopping
  bool hold(const Behaviour& b);   // waits for b's wait_file and wait_in_flight; false when stopping

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Behaviour> queue_;
  Behaviour default_;
  std::function<void(const ReceivedRequest&)> on_request_;
  std::vector<std::string> models_;
  int models_status_ = 200;
  std::vector<ReceivedRequest> received_;
  std::vector<std::thread> workers_;
  std::vector<int> open_fds_;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
  std::uint64_t counter_ = 0;
  double start_s_ = 0;
};

}  // namespace ks::test
