#include "support/openai_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace ks::test {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 411: return "Length Required";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
  }
}

bool send_all(int fd, const std::string& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

Json chat_body(const Behaviour& b, const std::string& model, std::uint64_t id) {
  Json content = b.text.empty() ? Json(nullptr) : Json(b.text);
  return Json::obj(
      {{"id", "chatcmpl-" + std::to_string(id)},
       {"object", "chat.completion"},
       {"created", 1767225600},
       {"model", model},
       {"choices", Json::arr({Json::obj({{"index", 0},
                                         {"message", Json::obj({{"role", "assistant"}, {"content", content}})},
                                         {"finish_reason", b.finish_reason}})})},
       {"usage", Json::obj({{"prompt_tokens", b.usage.input},
                            {"completion_tokens", b.usage.output},
                            {"total_tokens", b.usage.input + b.usage.output},
                            {"prompt_tokens_details", Json::obj({{"cached_tokens", b.usage.cached}})},
                            {"completion_tokens_details", Json::obj({{"reasoning_tokens", b.usage.reasoning}})}})}});
}

Json responses_body(const Behaviour& b, const std::string& model, std::uint64_t id) {
  bool complete = b.finish_reason == "stop";
  Json incomplete = nullptr;
  if (!complete)
    incomplete = Json::obj({{"reason", b.finish_reason == "length" ? "max_output_tokens" : b.finish_reason}});
  Json output = Json::arr({Json::obj({{"type", "reasoning"}, {"id", "rs_" + std::to_string(id)}, {"summary", Json::array()}})});
  if (!b.text.empty())
    output.push_back(Json::obj(
        {{"type", "message"},
         {"id", "msg_" + std::to_string(id)},
         {"role", "assistant"},
         {"status", complete ? "completed" : "incomplete"},
         {"content", Json::arr({Json::obj({{"type", "output_text"}, {"text", b.text}, {"annotations", Json::array()}})})}}));
  return Json::obj({{"id", "resp_" + std::to_string(id)},
                    {"object", "response"},
                    {"created_at", 1767225600},
                    {"status", complete ? "completed" : "incomplete"},
                    {"incomplete_details", incomplete},
                    {"model", model},
                    {"output", output},
                    {"usage", Json::obj({{"input_tokens", b.usage.input},
                                         {"input_tokens_details", Json::obj({{"cached_tokens", b.usage.cached}})},
                                         {"output_tokens", b.usage.output},
                                         {"output_tokens_details", Json::obj({{"reasoning_tokens", b.usage.reasoning}})},
                                         {"total_tokens", b.usage.input + b.usage.output}})}});
}

std::string http_response(int status, const std::string& body, const std::vector<std::string>& extra_headers) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  out += "Content-Type: application/json\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  for (const auto& h : extra_headers) out += h + "\r\n";
  out += "\r\n";
  out += body;
  return out;
}

// Header values may be written as numbers in a script ("retry_after": 1).
std::string text_or_number(const Json& j, std::string_view key, const std::string& def) {
  const Json* v = j.find(key);
  if (!v || v->is_null()) return def;
  if (v->is_int()) return std::to_string(v->as_int());
  if (v->is_number()) return std::to_string(v->as_number());
  return v->as_string();
}

}  // namespace

// ---------------------------------------------------------------------------
// Behaviours

Behaviour Behaviour::answer(std::string text, ServerUsage usage) {
  Behaviour b;
  b.text = std::move(text);
  b.usage = usage;
  return b;
}

Behaviour Behaviour::slow(double delay_s, std::string text) {
  Behaviour b = answer(std::move(text));
  b.delay_s = delay_s;
  return b;
}

Behaviour Behaviour::rate_limited(std::string retry_after) {
  Behaviour b = http_error(429, "Rate limit reached for requests", "rate_limit_exceeded");
  b.retry_after = std::move(retry_after);
  return b;
}

Behaviour Behaviour::server_error(int status, std::string message) { return http_error(status, std::move(message)); }

Behaviour Behaviour::http_error(int status, std::string message, std::string code) {
  Behaviour b;
  b.kind = Kind::error;
  b.status = status;
  b.error_message = std::move(message);
  b.error_code = std::move(code);
  return b;
}

Behaviour Behaviour::drop() {
  Behaviour b;
  b.kind = Kind::drop;
  return b;
}

Behaviour Behaviour::malformed(std::string body) {
  Behaviour b;
  b.kind = Kind::malformed;
  b.raw_body = std::move(body);
  return b;
}

Behaviour Behaviour::truncated(std::string partial_text) {
  Behaviour b = answer(std::move(partial_text));
  b.finish_reason = "length";
  return b;
}

Behaviour Behaviour::content_filter() {
  Behaviour b = answer("");
  b.finish_reason = "content_filter";
  return b;
}

Behaviour Behaviour::empty_answer() { return answer(""); }

Behaviour Behaviour::from_json(const Json& j) {
  if (!j.is_object()) throw std::runtime_error("a behaviour must be a JSON object");
  std::string kind = j.get_string("kind", "answer");
  Behaviour b;
  if (kind == "answer") b = answer(j.get_string("text"));
  else if (kind == "truncated") b = truncated(j.get_string("text"));
  else if (kind == "content_filter") b = content_filter();
  else if (kind == "empty") b = empty_answer();
  else if (kind == "error") b = http_error(static_cast<int>(j.get_int("status", 500)), j.get_string("message", "error"));
  else if (kind == "rate_limited") b = rate_limited(text_or_number(j, "retry_after", "1"));
  else if (kind == "unauthorized") b = http_error(401, j.get_string("message", "Incorrect API key provided"), "invalid_api_key");
  else if (kind == "drop") b = drop();
  else if (kind == "malformed") b = malformed(j.get_string("body", "{\"choices\": [{\"message\": "));
  else throw std::runtime_error("unknown behaviour kind \"" + kind + "\"");
  b.finish_reason = j.get_string("finish_reason", b.finish_reason);
  b.error_code = j.get_string("code", b.error_code);
  b.retry_after = text_or_number(j, "retry_after", b.retry_after);
  b.retry_after_ms = text_or_number(j, "retry_after_ms", b.retry_after_ms);
  b.delay_s = j.get_number("delay_s", 0);
  b.wait_file = j.get_string("wait_file");
  b.wait_in_flight = static_cast<int>(j.get_int("wait_in_flight", 0));
  b.match = j.get_string("match");
  b.model = j.get_string("model");
  if (const Json* u = j.find("usage"); u && u->is_object()) {
    b.usage.input = u->get_int("input", b.usage.input);
    b.usage.output = u->get_int("output", b.usage.output);
    b.usage.reasoning = u->get_int("reasoning", b.usage.reasoning);
    b.usage.cached = u->get_int("cached", b.usage.cached);
  }
  return b;
}

std::string ReceivedRequest::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

Json ReceivedRequest::json() const {
  auto j = Json::try_parse(body);
  return j ? *j : Json();
}

// ---------------------------------------------------------------------------
// The server

OpenAiTestServer::OpenAiTestServer(std::uint16_t port) {
  default_ = Behaviour::http_error(400, "ks-openai-test-server: no scripted behaviour left for this request",
                                   "script_exhausted");
  start_s_ = now_s();
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error(std::string("test server: socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 64) != 0) {
    int err = errno;
    ::close(listen_fd_);
    throw std::runtime_error(std::string("test server: bind/listen: ") + std::strerror(err));
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

OpenAiTestServer::~OpenAiTestServer() { stop(); }

std::string OpenAiTestServer::base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

void OpenAiTestServer::push(Behaviour b) {
  std::lock_guard lock(mu_);
  queue_.push_back(std::move(b));
}

void OpenAiTestServer::push(std::vector<Behaviour> bs) {
  std::lock_guard lock(mu_);
  for (auto& b : bs) queue_.push_back(std::move(b));
}

void OpenAiTestServer::set_default(Behaviour b) {
  std::lock_guard lock(mu_);
  default_ = std::move(b);
}

void OpenAiTestServer::set_models(std::vector<std::string> ids, int status) {
  std::lock_guard lock(mu_);
  models_ = std::move(ids);
  models_status_ = status;
}

void OpenAiTestServer::on_request(std::function<void(const ReceivedRequest&)> fn) {
  std::lock_guard lock(mu_);
  on_request_ = std::move(fn);
}

std::vector<ReceivedRequest> OpenAiTestServer::requests() const {
  std::lock_guard lock(mu_);
  return received_;
}

std::size_t OpenAiTestServer::request_count() const {
  std::lock_guard lock(mu_);
  return received_.size();
}

std::size_t OpenAiTestServer::pending() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

int OpenAiTestServer::max_in_flight() const {
  std::lock_guard lock(mu_);
  return max_in_flight_;
}

void OpenAiTestServer::stop() {
  if (stopping_.exchange(true)) return;
  { std::lock_guard lock(mu_); }  // a waiter between its check and its wait gets the notification
  cv_.notify_all();
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  {
    std::lock_guard lock(mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes workers blocked in reads
  }
  for (auto& t : workers_) t.join();
}

Behaviour OpenAiTestServer::take(const std::string& body) {
  std::lock_guard lock(mu_);
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (!it->match.empty() && body.find(it->match) == std::string::npos) continue;
    Behaviour b = std::move(*it);
    queue_.erase(it);
    return b;
  }
  return default_;
}

bool OpenAiTestServer::sleep_for(double seconds) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return stopping_.load(); });
}

bool OpenAiTestServer::hold(const Behaviour& b) {
  if (b.wait_in_flight > 0) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stopping_.load() || max_in_flight_ >= b.wait_in_flight; });
  }
  if (!b.wait_file.empty()) {
    std::error_code ec;
    while (!std::filesystem::exists(b.wait_file, ec))
      if (!sleep_for(0.01)) return false;
  }
  return !stopping_;
}

void OpenAiTestServer::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mu_);
    open_fds_.push_back(fd);
    workers_.emplace_back([this, fd] { serve(fd); });
  }
}

void OpenAiTestServer::serve(int fd) {
  std::string buf;
  // Reads until `want` bytes are buffered (or the header end, when want == 0).
  auto fill = [&](std::size_t want) {
    char chunk[65536];
    while (!stopping_) {
      if (want == 0 ? buf.find("\r\n\r\n") != std::string::npos : buf.size() >= want) return true;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf.append(chunk, static_cast<std::size_t>(n));
    }
    return false;
  };

  for (;;) {
    if (!fill(0)) break;
    std::size_t head_end = buf.find("\r\n\r\n");
    std::string head = buf.substr(0, head_end);
    buf.erase(0, head_end + 4);

    ReceivedRequest req;
    std::size_t line_end = head.find("\r\n");
    std::string request_line = head.substr(0, line_end);
    std::size_t sp1 = request_line.find(' '), sp2 = request_line.rfind(' ');
    req.method = request_line.substr(0, sp1);
    req.path = sp1 == std::string::npos ? "" : request_line.substr(sp1 + 1, sp2 - sp1 - 1);
    for (std::size_t p = line_end == std::string::npos ? head.size() : line_end + 2; p < head.size();) {
      std::size_t e = head.find("\r\n", p);
      if (e == std::string::npos) e = head.size();
      std::string line = head.substr(p, e - p);
      if (auto colon = line.find(':'); colon != std::string::npos)
        req.headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
      p = e + 2;
    }
    std::size_t length = 0;
    std::string cl = req.header("content-length");
    if (!cl.empty()) length = std::stoul(cl);
    if (length > 0 && !fill(length)) break;  // fill(0) would wait for another header
    req.body = buf.substr(0, length);
    buf.erase(0, length);
    req.t_s = now_s() - start_s_;

    std::function<void(const ReceivedRequest&)> hook;
    std::uint64_t id;
    {
      std::lock_guard lock(mu_);
      received_.push_back(req);
      hook = on_request_;
      id = ++counter_;
      max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
    }
    cv_.notify_all();  // wakes answers held for wait_in_flight
    if (hook) hook(req);
    // Out of flight before the reply is sent: a client that has its answer and
    // sends the next request must never see both counted at once.
    struct InFlight {
      OpenAiTestServer* s;
      bool held = true;
      void end() {
        if (!held) return;
        held = false;
        std::lock_guard lock(s->mu_);
        --s->in_flight_;
      }
      ~InFlight() { end(); }
    } in_flight{this};

    // GET .../models (the check a run makes before its first prompt) is
    // answered from the model list and takes no scripted behaviour.
    if (req.method == "GET" && req.path.ends_with("/models")) {
      Json data = Json::array();
      int status = 200;
      {
        std::lock_guard lock(mu_);
        status = models_status_;
        for (const auto& m : models_) data.push_back(Json::obj({{"id", m}, {"object", "model"}}));
      }
      std::vector<std::string> h = {"x-request-id: req_test_" + std::to_string(id)};
      std::string reply =
          status == 200 ? http_response(200, Json::obj({{"object", "list"}, {"data", data}}).dump(), h)
                        : http_response(status, R"({"error": {"message": "models: test status"}})", h);
      in_flight.end();
      if (!send_all(fd, reply)) break;
      continue;
    }

    Behaviour b = take(req.body);
    if (!hold(b)) break;
    if (b.delay_s > 0 && !sleep_for(b.delay_s)) break;
    if (b.kind == Behaviour::Kind::drop) break;

    bool chat = req.path.ends_with("/chat/completions");
    bool responses = req.path.ends_with("/responses");
    std::vector<std::string> headers = {"x-request-id: req_test_" + std::to_string(id)};
    for (std::size_t n = 0, sent = 0; sent < b.filler_header_bytes; ++n) {
      headers.push_back(fmt::format("x-filler-{}: {}", n, std::string(1000, 'f')));
      sent += headers.back().size() + 2;
    }
    std::string reply;
    if (req.method != "POST") {
      reply = http_response(405, R"({"error": {"message": "use POST"}})", headers);
    } else if (!chat && !responses) {
      reply = http_response(404, R"({"error": {"message": "unknown path )" + req.path + R"("}})", headers);
    } else if (b.kind == Behaviour::Kind::malformed) {
      reply = http_response(200, b.raw_body, headers);
    } else if (b.kind == Behaviour::Kind::error) {
      std::string msg = b.error_message;
      if (auto p = msg.find("{authorization}"); p != std::string::npos)
        msg.replace(p, 15, req.header("authorization"));
      if (!b.retry_after.empty()) headers.push_back("Retry-After: " + b.retry_after);
      if (!b.retry_after_ms.empty()) headers.push_back("retry-after-ms: " + b.retry_after_ms);
      Json err = Json::obj({{"message", msg}, {"type", "test_error"}});
      if (!b.error_code.empty()) err["code"] = b.error_code;
      reply = http_response(b.status, Json::obj({{"error", err}}).dump(), headers);
    } else {
      std::string model = b.model.empty() ? req.json().get_string("model", "test-model") : b.model;
      Json body = chat ? chat_body(b, model, id) : responses_body(b, model, id);
      reply = http_response(200, body.dump(), headers);
    }
    in_flight.end();
    if (!send_all(fd, reply)) break;
    if (lower(req.header("connection")) == "close") break;
  }
  std::lock_guard lock(mu_);
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
  ::close(fd);
}

}  // namespace ks::test
