// --wandb, --wandb-project and --run-name of `run` and `resume` (K-Search's
// flags; docs/search.md, "Weights & Biases from the run").
#include "exit_codes.hpp"
#include "search_cli.hpp"

namespace ks::cli {

std::vector<OptionSpec> with_wandb_options(std::vector<OptionSpec> options) {
  options.push_back({"wandb", "", "Log the run to Weights & Biases as K-Search does: per round "
                                  "{task}/generate/{score} and best_{score}, and each passing round's code as a "
                                  "generated-code artifact. Needs the wandb package in $KSEARCH_PYTHON (else "
                                  "python3); W&B's own settings come from WANDB_* variables (WANDB_MODE=offline "
                                  "writes locally, `wandb sync` uploads later). Without wandb, or with W&B "
                                  "unreachable, the search goes on after a one-line warning.",
                     "", false});
  options.push_back({"wandb-project", "NAME", "W&B project for --wandb.", "$WANDB_PROJECT, else flashinfer-bench",
                     false});
  options.push_back({"run-name", "NAME", "W&B run name for --wandb.", "$RUN_NAME, else W&B's", false});
  return options;
}

WandbOptions wandb_from_args(const Args& a) {
  WandbOptions w;
  w.enabled = a.has("wandb");
  w.project = a.get("wandb-project");
  w.run_name = a.get("run-name");
  if (!w.enabled && (a.has("wandb-project") || a.has("run-name")))
    throw UsageError("--wandb-project and --run-name name the W&B run of --wandb; add --wandb");
  return w;
}

}  // namespace ks::cli
