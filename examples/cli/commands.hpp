// The ksearch command-line program: one function per subcommand.
#pragma once

namespace ks::cli {

// Each returns the process exit code: 0 success, 1 failure, 2 usage error.
int cmd_run(int argc, char** argv);     // run a search
int cmd_resume(int argc, char** argv);  // resume a run folder
int cmd_replay(int argc, char** argv);  // reproduce a run folder into a new one
int cmd_show(int argc, char** argv);    // print a run's tree and best results
int cmd_report(int argc, char** argv);  // a run folder as one HTML page
int cmd_compare(int argc, char** argv); // runs of one task side by side
int cmd_eval(int argc, char** argv);    // evaluate one solution file
int cmd_tasks(int argc, char** argv);   // list built-in and example tasks
int cmd_devices(int argc, char** argv); // is CUDA evaluation available here?
int cmd_export(int argc, char** argv);  // a solution as a file for another harness

}  // namespace ks::cli
