#include "llm/http.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <memory>

#include "ksearch/error.hpp"
#include "ksearch/version.h"

namespace ks::llm {
namespace {

using Clock = std::chrono::steady_clock;

void global_init() {
  static const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (rc != CURLE_OK)
    throw Error(Status::internal, fmt::format("libcurl could not start: {}", curl_easy_strerror(rc)));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

bool header_is(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  return true;
}

// One attempt in flight. Owns its easy handle and the memory curl points into.
struct Transfer {
  std::size_t job = 0;
  CURLM* multi = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string body;
  HttpResult result;
  std::size_t max_body = 0;
  std::size_t max_headers = 0;
  std::size_t header_bytes = 0;  // every response's headers so far
  std::optional<double> retry_after_ms;
  char errbuf[CURL_ERROR_SIZE] = {};
  Clock::time_point start = Clock::now();

  ~Transfer() {
    if (easy) {
      if (multi) curl_multi_remove_handle(multi, easy);
      curl_easy_cleanup(easy);
    }
    if (headers) curl_slist_free_all(headers);
  }
};

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t bytes = size * n;
  if (t->result.body.size() + bytes > t->max_body) {
    t->result.body_too_large = true;
    return 0;  // aborts the transfer with CURLE_WRITE_ERROR
  }
  t->result.body.append(data, bytes);
  return bytes;
}

// A header value as kept for messages: trimmed, and cut at kMaxHeaderValueChars.
std::string kept_value(std::string_view v) {
  v = trim(v);
  return std::string(v.substr(0, kMaxHeaderValueChars));
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * n);
  t->header_bytes += line.size();
  if (t->header_bytes > t->max_headers) {
    t->result.headers_too_large = true;
    return 0;  // aborts the transfer with CURLE_WRITE_ERROR
  }
  if (line.rfind("HTTP/", 0) == 0) {
    // A new response (after a 100 Continue or a proxy's CONNECT): start over.
    t->result.retry_after_s.reset();
    t->retry_after_ms.reset();
    t->result.request_id.clear();
    std::string_view rest = trim(line);
    auto sp = rest.find(' ');
    sp = sp == std::string_view::npos ? sp : rest.find(' ', sp + 1);
    t->result.status_text = sp == std::string_view::npos ? "" : kept_value(rest.substr(sp + 1));
  } else if (header_is(line, "retry-after-ms")) {
    std::string v(trim(line.substr(15)));
    char* end = nullptr;
    double ms = std::strtod(v.c_str(), &end);
    if (end != v.c_str() && ms >= 0) t->retry_after_ms = ms / 1000.0;
  } else if (header_is(line, "retry-after")) {
    std::string v(trim(line.substr(12)));
    char* end = nullptr;
    double s = std::strtod(v.c_str(), &end);
    if (end != v.c_str() && *end == '\0' && s >= 0) {
      t->result.retry_after_s = s;
    } else if (time_t when = curl_getdate(v.c_str(), nullptr); when >= 0) {
      // An HTTP date: the delay is the time left until then.
      t->result.retry_after_s = std::max(0.0, std::difftime(when, std::time(nullptr)));
    }
  } else if (header_is(line, "x-request-id") || header_is(line, "request-id")) {
    t->result.request_id = kept_value(line.substr(line.find(':') + 1));
  }
  return size * n;
}

long millis(double seconds) { return static_cast<long>(std::max(1.0, seconds * 1000.0)); }

std::unique_ptr<Transfer> start_transfer(CURLM* multi, std::size_t job, HttpRequest&& req) {
  auto t = std::make_unique<Transfer>();
  t->job = job;
  t->body = std::move(req.body);
  t->max_body = req.max_body_bytes;
  t->max_headers = req.max_header_bytes;
  t->easy = curl_easy_init();
  if (!t->easy) throw Error(Status::internal, "libcurl could not create a transfer");
  for (const auto& h : req.headers) {
    curl_slist* next = curl_slist_append(t->headers, h.c_str());
    if (!next) throw Error(Status::internal, "libcurl could not store a request header");
    t->headers = next;
  }
  CURL* e = t->easy;
  curl_easy_setopt(e, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
  if (req.get) {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->body.size()));
  }
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM: we run inside other people's threads
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, millis(req.timeout_s));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, millis(req.connect_timeout_s));
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  // Long reasoning calls sit idle for minutes; keepalives stop NATs dropping them.
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(e, CURLOPT_USERAGENT, "libksearch/" KS_VERSION_STRING);
  if (!req.proxy.empty()) curl_easy_setopt(e, CURLOPT_PROXY, req.proxy.c_str());
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
  curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
  CURLMcode mc = curl_multi_add_handle(multi, e);
  if (mc != CURLM_OK)
    throw Error(Status::internal, fmt::format("libcurl could not start a transfer: {}", curl_multi_strerror(mc)));
  t->multi = multi;
  t->start = Clock::now();
  return t;
}

void finish_transfer(Transfer& t, CURLcode code) {
  HttpResult& r = t.result;
  r.curl_code = static_cast<int>(code);
  curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &r.status);
  if (code != CURLE_OK) {
    r.transport_error = t.errbuf[0] ? std::string(trim(t.errbuf)) : std::string(curl_easy_strerror(code));
    if (r.body_too_large)
      r.transport_error = fmt::format("the response is larger than the limit of {} bytes", t.max_body);
    if (r.headers_too_large)
      r.transport_error = fmt::format("the response's headers are larger than the limit of {} bytes", t.max_headers);
  }
  // retry-after-ms is the more precise of the two when a server sends both.
  if (t.retry_after_ms) r.retry_after_s = t.retry_after_ms;
  r.elapsed_s = std::chrono::duration<double>(Clock::now() - t.start).count();
}

}  // namespace

TransportFailure classify_transport(int curl_code) {
  switch (static_cast<CURLcode>(curl_code)) {
    case CURLE_OPERATION_TIMEDOUT:
      return TransportFailure::timeout;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_WRITE_ERROR:  // our own limit on the body or header size
    case CURLE_OUT_OF_MEMORY:
    case CURLE_BAD_FUNCTION_ARGUMENT:
      return TransportFailure::permanent;
    default:
      return TransportFailure::transient;
  }
}

const char* http_reason(long status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 422: return "Unprocessable Entity";
    case 425: return "Too Early";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
  }
}

HttpClient::HttpClient() { global_init(); }

HttpClient::~HttpClient() {
  for (void* m : idle_) curl_multi_cleanup(static_cast<CURLM*>(m));
}

void* HttpClient::take_multi() {
  std::lock_guard lock(mu_);
  void* m = nullptr;
  if (!idle_.empty()) {
    m = idle_.back();
    idle_.pop_back();
  } else {
    m = curl_multi_init();
    if (!m) throw Error(Status::internal, "libcurl could not create a multi handle");
  }
  in_use_.push_back(m);
  return m;
}

void HttpClient::give_back(void* multi) {
  std::lock_guard lock(mu_);
  in_use_.erase(std::find(in_use_.begin(), in_use_.end(), multi));
  idle_.push_back(multi);
}

void HttpClient::abort() {
  aborted_.store(true);
  std::lock_guard lock(mu_);
  // curl_multi_wakeup is the one call libcurl allows from another thread.
  for (void* m : in_use_) curl_multi_wakeup(static_cast<CURLM*>(m));
}

bool HttpClient::run(std::size_t jobs, int max_parallel, const Hooks& hooks) {
  if (aborted_.load()) return false;
  if (jobs == 0) return true;
  std::size_t cap = static_cast<std::size_t>(std::max(1, max_parallel));
  CURLM* multi = static_cast<CURLM*>(take_multi());
  struct Lease {
    HttpClient* client;
    CURLM* multi;
    ~Lease() { client->give_back(multi); }
  } lease{this, multi};

  // Jobs waiting to (re)start, with the earliest time they may.
  std::deque<std::pair<Clock::time_point, std::size_t>> waiting;
  for (std::size_t i = 0; i < jobs; ++i) waiting.emplace_back(Clock::now(), i);
  // Destroyed (and detached from the multi handle) on every exit path.
  std::vector<std::unique_ptr<Transfer>> active;

  while (!waiting.empty() || !active.empty()) {
    if (aborted_.load()) return false;  // `active` detaches and frees the transfers
    auto now = Clock::now();
    for (auto it = waiting.begin(); it != waiting.end() && active.size() < cap;) {
      if (it->first > now) {
        ++it;
        continue;
      }
      std::size_t job = it->second;
      it = waiting.erase(it);
      if (auto req = hooks.next_attempt(job)) active.push_back(start_transfer(multi, job, std::move(*req)));
    }
    if (active.empty() && waiting.empty()) break;

    int running = 0;
    CURLMcode mc = curl_multi_perform(multi, &running);
    if (mc != CURLM_OK)
      throw Error(Status::internal, fmt::format("libcurl: {}", curl_multi_strerror(mc)));
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      auto it = std::find_if(active.begin(), active.end(),
                             [&](const auto& t) { return t->easy == msg->easy_handle; });
      if (it == active.end()) continue;
      finish_transfer(**it, msg->data.result);
      std::unique_ptr<Transfer> done = std::move(*it);
      active.erase(it);
      std::size_t job = done->job;
      HttpResult result = std::move(done->result);
      done.reset();  // frees the connection slot before the hook runs
      if (auto delay = hooks.finished(job, std::move(result))) {
        auto when = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(std::max(0.0, *delay)));
        waiting.emplace_back(when, job);
      }
    }

    if (active.empty() && waiting.empty()) break;
    // Sleep until a socket is ready, curl's own timer fires, or the next
    // waiting job may start.
    long wait_ms = 1000;
    if (active.size() < cap && !waiting.empty()) {
      auto next = std::min_element(waiting.begin(), waiting.end())->first;
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
      wait_ms = std::clamp<long>(static_cast<long>(ms), 0, 1000);
    }
    if (!active.empty() || wait_ms > 0) {
      mc = curl_multi_poll(multi, nullptr, 0, static_cast<int>(wait_ms), nullptr);
      if (mc != CURLM_OK)
        throw Error(Status::internal, fmt::format("libcurl: {}", curl_multi_strerror(mc)));
    }
  }
  return !aborted_.load();
}

}  // namespace ks::llm
