// The exit status of every ksearch command, in one place (README, --help).
#pragma once

#include <stdexcept>
#include <string>

namespace ks::cli {

enum ExitCode : int {
  kExitOk = 0,               // done; for run/resume: a passing kernel; for eval: the candidate passes
  kExitError = 1,            // an error: a bad task, no device, an unreachable endpoint, a damaged run folder
  kExitUsage = 2,            // a usage error: an unknown option, a missing or bad value
  kExitNoPassingKernel = 3,  // run/resume ran, and no candidate passed
  kExitCandidateFailed = 4,  // eval: the candidate does not pass (compile error, wrong result, crash, ...)
  kExitReplayDiverged = 5,   // run --llm replay / replay: stopped where the search left its recording
  kExitWeakCheck = 6,        // tasks --check: a candidate that does not compute the task passes its check
  kExitInterrupted = 130,    // run/resume stopped by Ctrl-C or SIGTERM (the run folder can be resumed)
};

inline constexpr const char* kExitCodesHelp =
    "Exit status: 0 done (run/resume: a passing kernel; eval: the candidate passes), 1 error, 2 usage error, "
    "3 the run ended without a passing kernel, 4 the evaluated candidate does not pass, 5 a replay stopped where "
    "the search left its recording, 6 (tasks --check) the task's check is weak, 130 interrupted (Ctrl-C or SIGTERM; the run can be resumed). With --json, standard output holds one JSON document, also for errors: "
    "{\"error\": {\"message\", \"status\", \"exit_code\"}}.";

// A usage problem a command found itself (main prints it and exits 2).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// True when the command line asked for --json: then stdout holds JSON only,
// errors included, and progress goes to stderr.
bool json_output();
void set_json_output(bool on);

}  // namespace ks::cli
