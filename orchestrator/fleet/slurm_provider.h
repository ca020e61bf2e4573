#ifndef SEXTANT_ORCHESTRATOR_FLEET_SLURM_PROVIDER_H_
#define SEXTANT_ORCHESTRATOR_FLEET_SLURM_PROVIDER_H_

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "orchestrator/fleet/provider.h"

namespace sextant {

struct SlurmOptions {
  std::string worker_binary;   // path of sextant-worker on the compute nodes; required
  std::string partition;       // on-demand and reserved jobs; default empty (Slurm's default)
  std::string spot_partition;  // spot jobs, submitted with --requeue; default: partition
  std::string commands_dir;    // where sbatch, squeue, scancel are; default empty (PATH)
};

// Instances are Slurm jobs: `sbatch --wrap "sextant-worker ..."` starts one, `squeue` tells
// its state, `scancel` stops it. Spot maps to a preemptible partition with --requeue, so a job
// that Slurm preempts comes back under the same launch token. Commands see this process's
// environment (SLURM_CONF picks the cluster). Not thread-safe.
class SlurmProvider : public Provider {
 public:
  explicit SlurmProvider(SlurmOptions options) : options_(std::move(options)) {}

  const char* name() const override { return "slurm"; }
  std::string Label(const std::string& handle) const override {
    return absl::StrCat("slurm job=", handle);
  }
  // Returns the job id. Unavailable when sbatch refuses for capacity or cannot reach the
  // controller, Internal for other sbatch errors (the message holds sbatch's stderr).
  absl::StatusOr<std::string> Launch(const InstanceRequest& request) override;
  // scancel; a job that is gone already is not an error.
  absl::Status Terminate(const std::string& handle) override;
  // PENDING (and CONFIGURING) is Pending, RUNNING and COMPLETING Running; a job squeue no
  // longer lists is Gone.
  InstanceStatus Poll(const std::string& handle) override;
  // With notice: `scancel --full --signal=TERM` (the worker, the batch script, checkpoints
  // its trial and goes); without: scancel.
  absl::Status Interrupt(const std::string& handle, bool notice) override;

 private:
  std::string Command(const char* name) const;
  SlurmOptions options_;
};

// Runs argv (argv[0] looked up on PATH) and waits. Returns its exit code; *output gets its
// stdout and stderr. Internal when it cannot start.
absl::StatusOr<int> RunCommandForOutput(const std::vector<std::string>& argv, std::string* output);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FLEET_SLURM_PROVIDER_H_
