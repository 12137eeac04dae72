// A host candidate's own process: the only place its code runs.
//
// The run worker keeps the protocol to the parent, the inputs, the reference
// outputs, the checks and the clock. A candidate's shared object is loaded
// into a separate process (ksearch-worker --role candidate) that holds only
// the blocks it is bound to (sealed memfds mapped with the worker's guard
// layout, see guarded_memory.hpp) and one socket to the worker. On that
// socket the worker asks and the candidate's process answers; every request
// carries a fresh random token that its answer must repeat, so nothing the
// candidate queues ahead of time is taken for an answer.
//
// Between requests the process is stopped (SIGSTOP), threads and all, so a
// candidate runs only inside the worker's timed window: it cannot finish its
// work after answering, or touch its buffers while the worker checks them
// or the reference runs. Where the kernel allows (user namespaces), the
// process also gets a PID namespace of its own (the worker is not there to
// signal or trace), a fresh /proc, no capabilities, and a seccomp filter
// that refuses new processes, exec and tracing. docs/security.md says what
// each layer stops.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/backend.hpp"

namespace ks::eval::host {

// How to start candidate processes.
struct CandidateProcessOptions {
  std::string exe;                 // the ksearch-worker program (it has the candidate role)
  std::uint64_t memory_limit = 0;  // RLIMIT_AS of the candidate's process in bytes; 0: none
  // A Python candidate's process (eval/python/): this command (an absolute
  // interpreter path first) instead of `exe --role candidate`. The layers
  // it was started in are appended as its last argument; the memory limit
  // is set before exec, since the interpreter cannot set it itself before
  // it imports anything.
  std::vector<std::string> command;
  std::vector<std::string> env;    // NAME=value entries added to the environment it inherits
  // The interpreter Python candidates run under (eval/python/); empty: $KSEARCH_PYTHON or python3.
  std::string python;
  // A PID namespace of its own. A GPU candidate's process stays in the
  // worker's (python_program.cpp says why); its user namespace keeps it
  // from tracing or reading across, and its seccomp filter from signalling
  // any process but itself (candidate_seccomp_program's own_pid).
  bool pid_namespace = true;
  // Folders covered, in its own mount namespace, by an empty read-only
  // tmpfs: the worker's reference outputs on disk, the Python candidates'
  // artifacts and kept extension libraries.
  std::vector<std::string> hide;
  // The Python candidates' cache: <cache>/python, whose ext/ holds the
  // C++/CUDA Solutions' libraries the worker built (eval/python/).
  std::string python_cache;
  // A Python candidate's process forked by this worker's long-lived Python
  // (candidate_runner.py --zygote, started once with `command` and kept),
  // which has imported `zygote_imports` already, instead of a fresh
  // interpreter. It gets the same layers, set up by itself right after the
  // fork. Where the zygote cannot start or fork, the process is started
  // directly; $KSEARCH_PYTHON_ZYGOTE=0 always does that.
  bool zygote = false;
  // What the zygote imports before it forks, comma-separated: PyTorch alone
  // for the host backend (Triton's libraries would take a host candidate's
  // address-space limit), PyTorch and Triton on a GPU.
  std::string zygote_imports = "torch";
  // A limit on its resident memory in bytes, watched while it works (every
  // few milliseconds, from /proc): for a process RLIMIT_AS cannot bound, a
  // GPU one, whose CUDA driver reserves far more address space than it
  // uses. Passing it kills the process: status memory_limit. 0: none.
  std::uint64_t resident_limit = 0;
};

// One argument of a call: a block (by the worker's address of it) or a value
// of at most 8 bytes, as the typed shim reads it.
struct WireArg {
  const void* block = nullptr;  // non-null: a guarded block, passed as the candidate's address of it
  std::uint64_t value = 0;      // the argument's bytes otherwise
};
struct WireCall {
  std::string shim;  // the generated extern "C" entry
  std::string fn;    // the function it calls, for messages
  std::vector<WireArg> args;
};

struct SharedBlock;  // guarded_memory.hpp
struct ChildSetup;   // child_spawn.hpp

class CandidateProcess {
 public:
  // Starts the process. Throws RunError when it cannot be started.
  explicit CandidateProcess(const CandidateProcessOptions& options);
  ~CandidateProcess();  // kills and reaps it
  CandidateProcess(const CandidateProcess&) = delete;
  CandidateProcess& operator=(const CandidateProcess&) = delete;

  // Loads the shared object (its static constructors run here). Throws
  // RunError: runtime_error when it does not load, crashed/memory_limit when
  // the process dies.
  void load(const std::string& path);
  // Maps what the calls use (blocks it has not seen yet), unmaps blocks no
  // longer named, and resolves every shim. Throws RunError.
  void bind(const std::vector<WireCall>& calls);
  // Runs the bound calls once; returns the wall time from the request to the
  // answer in milliseconds, as the worker's clock sees it. Throws RunError
  // (runtime_error for an exception the kernel threw, crashed or
  // memory_limit when the process dies, runtime_error when it breaks the
  // protocol). Every failure ends the process: the next call fails the same way.
  double run();

  // The requests a Python candidate's process serves (eval/python/): the
  // same framing, tokens and stops as load/bind/run, with a text (JSON) in
  // each direction. An error answer is returned, not thrown; a death or a
  // breach of the protocol throws RunError as load/bind/run do. `ms`, when
  // given, gets the worker's wall time from the request to the answer.
  // `send` goes with the request (SCM_RIGHTS); the descriptors an answer
  // carries are kept for the load request alone, which is answered before
  // any candidate code exists in the process, and are the caller's to close.
  enum class Request : std::uint32_t { load = 1, bind = 3, run = 4, import = 6 };
  struct Answer {
    bool error = false;
    std::string text;
    std::vector<int> fds;
  };
  Answer ask(Request request, std::string_view text, double* ms = nullptr, const std::vector<int>& send = {});

  // The memory_limit verdict, from what this process was seen to take: its
  // peak address space (VmPeak) at 90% of the address-space limit or more,
  // or its resident memory over the resident limit; read from /proc while
  // it lives. Nothing the process says decides it. std::nullopt otherwise.
  std::optional<Failure> memory_verdict(const std::string& while_doing);
  // What a memory failure the process reported, but the evaluator did not
  // see, adds to its words: the limit and the peak it saw.
  std::string memory_note();
  // Sends the blocks (guarded_alloc'd) the process has not mapped yet, each
  // with its memfd, and forgets those not named (the next load/bind/ask
  // tells it which are live). Returns each block's serial. Throws RunError
  // for a pointer that is no block.
  std::vector<std::uint64_t> share(const std::vector<const void*>& blocks);
  // Sends a CUDA allocation's POSIX descriptor (a Python candidate's
  // process maps it with the driver's VMM calls), under the number its
  // tensors name it by. The descriptor stays the caller's. Throws RunError.
  void share_cuda(std::uint64_t serial, std::uint64_t size, int fd);

  pid_t pid() const { return pid_; }
  // The layers this process got, for metrics: e.g. "process+pidns+proc+seccomp".
  // The first part is its hello, said before any candidate code existed in
  // it; "+seccomp" is what /proc/<pid>/status showed the evaluator.
  std::string isolation();

 private:
  struct Reply;
  ChildSetup child_setup(const CandidateProcessOptions& options, int sock, int out);
  static std::string zygote_spec(const ChildSetup& setup);
  bool read_hello();
  bool start_failed(const CandidateProcessOptions& options, bool namespaces, bool& forked);
  Reply request(std::uint32_t op, const std::string& payload, const std::vector<int>& fds = {});
  void send_packet(const std::string& packet, const std::vector<int>& fds);
  void map_block(const SharedBlock& block);
  [[noreturn]] void died(const std::string& while_doing);
  [[noreturn]] void broke(const std::string& what);
  [[noreturn]] void failed_answer(const std::string& while_doing, const std::string& said);
  void stop();
  void kill_and_reap();
  void drain_output();
  std::string output_tail();

  static constexpr std::size_t kOutputTail = 4096;

  pid_t pid_ = -1;
  pid_t init_pid_ = -1;  // the idle init of its PID namespace, when the zygote made one
  void end_init();
  int sock_ = -1;
  int out_ = -1;           // its stdout and stderr
  std::string output_;     // the tail of what it printed
  bool running_ = false;   // continued, not yet stopped
  bool dead_ = false;
  int wait_status_ = 0;    // once reaped
  std::string failure_;    // why the process is gone, for every later call
  std::string crash_line_; // what its crash reporter said
  std::uint64_t memory_limit_ = 0;
  std::uint64_t resident_limit_ = 0;
  std::uint64_t resident_bytes() const;  // now: its anonymous and shared memory, from /proc/<pid>/status
  std::uint64_t status_kib(std::string_view field) const;  // a "Field:  N kB" line of /proc/<pid>/status
  std::uint64_t peak_vm_ = 0;  // the largest VmPeak seen (bytes)
  [[noreturn]] void over_memory(const std::string& while_doing, std::uint64_t resident);
  std::string isolation_;
  bool seccomp_seen_ = false;
  // Without namespaces (no private tmpfs): its TMPDIR and HOME, made for it
  // and deleted with it.
  std::string own_tmp_;
  const std::string& own_tmp_folder();
  std::vector<std::uint64_t> mapped_;  // serials of the blocks it has mapped
};

// The candidate role of ksearch-worker: serves one CandidateProcess on
// descriptor `sock` until the worker hangs up (then it exits 0); returns a
// non-zero code when it cannot start. `isolation` names the layers it was
// started in, for its first message.
int candidate_process_main(int sock, std::uint64_t memory_limit, const std::string& isolation);

}  // namespace ks::eval::host
