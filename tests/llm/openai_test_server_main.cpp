// ks-openai-test-server: the test server as a program, for end-to-end CLI
// tests and benchmarks. Prints "listening on http://127.0.0.1:PORT/v1" once
// ready and serves until SIGINT or SIGTERM.
//
//   ks-openai-test-server [--port N] [--script FILE] [--default JSON]
//                         [--delay S] [--log FILE] [--models ID,ID] [--models-status N]
//
// --script: a JSON array of behaviours (see Behaviour::from_json), or
//   {"behaviours": [...], "default": {...}}; a behaviour with "repeat": n is
//   queued n times. "wait_file": PATH holds an answer until PATH exists and
//   "wait_in_flight": N until N requests have been in flight at once, so a
//   test sets the pace by what it does, not by delays.
// --default: the behaviour used once the script is used up, e.g.
//   '{"text": "ok", "delay_s": 0.2}'. Without it, unscripted requests get 400.
// --delay S: shorthand for a default that answers "ok" after S seconds.
// --log FILE: appends every request received as one JSON line
//   {"method", "path", "headers", "body", "t_s"}, so a test can check what
//   was sent (t_s: when it arrived, seconds since the server started).
// --models: the ids GET .../models lists (none by default); --models-status N:
//   GET .../models answers HTTP N instead (404: a server without that route).
// On SIGINT or SIGTERM it prints "served N requests, at most M at once" and
// exits: M shows how many requests a client had in flight together.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>

#include "support/openai_server.hpp"

using ks::Json;
using ks::test::Behaviour;

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "ks-openai-test-server: %s\n"
               "usage: ks-openai-test-server [--port N] [--script FILE] [--default JSON] [--delay S] [--log FILE]\n"
               "                             [--models ID,ID] [--models-status N]\n",
               why);
  return 2;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void queue_script(ks::test::OpenAiTestServer& server, const Json& script) {
  const Json* list = &script;
  if (script.is_object()) {
    if (const Json* d = script.find("default")) server.set_default(Behaviour::from_json(*d));
    list = script.find("behaviours");
    if (!list) return;
  }
  if (!list->is_array()) throw std::runtime_error("the script must be an array of behaviours");
  for (const auto& b : list->as_array()) {
    std::int64_t n = b.is_object() ? b.get_int("repeat", 1) : 1;
    for (std::int64_t i = 0; i < n; ++i) server.push(Behaviour::from_json(b));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  std::string script, default_json, log_path, models;
  int models_status = 200;
  double delay = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--port") port = std::stoi(value());
      else if (a == "--script") script = value();
      else if (a == "--default") default_json = value();
      else if (a == "--delay") delay = std::stod(value());
      else if (a == "--log") log_path = value();
      else if (a == "--models") models = value();
      else if (a == "--models-status") models_status = std::stoi(value());
      else if (a == "--help" || a == "-h") {
        usage("an OpenAI-compatible test server");
        return 0;
      }
      else return usage(("unknown argument " + a).c_str());
    } catch (const std::exception& e) {
      return usage(e.what());
    }
  }

  // Block the stop signals before any thread starts, so sigwait gets them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  try {
    ks::test::OpenAiTestServer server(static_cast<std::uint16_t>(port));
    if (delay >= 0) server.set_default(Behaviour::slow(delay, "ok"));
    std::vector<std::string> ids;
    for (std::size_t p = 0; p < models.size();) {
      std::size_t c = models.find(',', p);
      if (c == std::string::npos) c = models.size();
      if (c > p) ids.push_back(models.substr(p, c - p));
      p = c + 1;
    }
    server.set_models(ids, models_status);
    if (!default_json.empty()) server.set_default(Behaviour::from_json(Json::parse(default_json)));
    if (!script.empty()) queue_script(server, Json::parse(read_all(script)));
    std::ofstream log;
    std::mutex log_mu;
    if (!log_path.empty()) {
      log.open(log_path, std::ios::app);
      if (!log) throw std::runtime_error("cannot write " + log_path);
      server.on_request([&](const ks::test::ReceivedRequest& r) {
        Json headers = Json::object();
        for (const auto& [k, v] : r.headers) headers[k] = v;
        std::lock_guard lock(log_mu);
        log << Json::obj({{"method", r.method},
                          {"path", r.path},
                          {"headers", headers},
                          {"body", r.body},
                          {"t_s", r.t_s}})
                   .dump()
            << std::endl;
      });
    }
    std::printf("listening on %s\n", server.base_url().c_str());
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    server.stop();
    std::printf("served %zu requests, at most %d at once\n", server.request_count(), server.max_in_flight());
    std::fflush(stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ks-openai-test-server: %s\n", e.what());
    return 1;
  }
  return 0;
}
