// The evaluation server: one long-lived evaluator per user and
// configuration that `ksearch eval --server` (make_served_evaluator) calls
// instead of building its own, so its workers, the compiled references and
// the reference outputs it keeps in GPU memory outlive each call. Optional:
// nothing starts one unless asked. It listens on a Unix socket in a folder
// only this user can enter, answers only this user's processes
// (SO_PEERCRED), serves one evaluation at a time, and exits (ending its
// workers and removing its socket) after idle_s without a request, on
// SIGTERM or SIGINT, or when asked to stop. It is started with an
// environment built from an allowlist, never a credential of its client's,
// and drops a connection that sends no whole request within 2 s of
// silence. docs/evaluation.md, "The evaluation server".
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"

namespace ks::eval {

struct ServerPaths {
  std::filesystem::path dir;     // $XDG_RUNTIME_DIR/ksearch or /tmp/ksearch-<uid>, mode 0700
  std::filesystem::path socket;  // <dir>/eval-<id>.sock
  std::filesystem::path lock;    // <dir>/eval-<id>.lock: held by the live server, holds its pid
  std::filesystem::path log;     // <dir>/eval-<id>.log: the server's stderr
  std::string id;                // what identifies the configuration (see server_paths)
};

// Where the server for `config` lives. Its id is a hash of what the
// evaluator's behaviour depends on: the configuration (not its options,
// which travel with each request), the worker program (path, size, time:
// a rebuilt one is another server), the user and the environment the server
// is started with (the workers' allowlist, plus HOME, XDG_CACHE_HOME, TMPDIR,
// CXX, PYTHONPATH and KSEARCH_* settings; no credential). Creates the
// folder; refuses one that another user owns or others may enter.
ServerPaths server_paths(const EvaluatorConfig& config);

// The server's main loop (ksearch-worker --role eval-server). Returns the
// process's exit status: 0 after an idle timeout, a signal or a stop
// request, or when another server already holds the lock.
// `ready_fd` (or -1) gets one byte once the socket listens, then is closed.
int serve_evaluations(const EvaluatorConfig& config, const ServerPaths& paths, double idle_s, int ready_fd = -1);

// An evaluator whose evaluations run in the server for `config`, started
// (detached, in a session of its own) when none answers. Throws ks::Error
// naming the cause when none can be started (the server's log included).
std::unique_ptr<Evaluator> connect_evaluation_server(const EvaluatorConfig& config, double idle_s);

// The configuration a server was started with (its --server-config).
EvaluatorConfig server_config_from_json(const Json& j);

// Stops the server for `config` (SIGTERM: an evaluation in progress is
// cancelled) and waits until it has ended its workers. False when none was
// running.
bool stop_evaluation_server(const EvaluatorConfig& config);

}  // namespace ks::eval
