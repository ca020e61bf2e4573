#include "worker/telemetry.h"

#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/proc_file.h"

namespace sextant {
namespace {

struct ProcStat {
  pid_t pgrp = 0;
  double cpu_seconds = 0;
  int64_t rss_bytes = 0;
  bool exited = false;  // a zombie (Z) or dying (X): its exit status is not yet collected
};

// Fields of /proc/PID/stat after the parenthesised command name (which may hold spaces).
bool ReadProcStat(const std::string& pid, ProcStat* out) {
  // The process may exit while we read: ReadProcFile gives "" then.
  const std::string text = ReadProcFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = text.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream rest(text.substr(paren + 2));
  std::vector<std::string> f;
  std::string token;
  while (rest >> token) f.push_back(token);
  // After ')': state(0) ppid(1) pgrp(2) ... utime(11) stime(12) ... rss(21) in pages.
  if (f.size() < 22) return false;
  static const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  static const int64_t page = ::sysconf(_SC_PAGESIZE);
  int64_t pgrp, utime, stime, rss;
  if (!absl::SimpleAtoi(f[2], &pgrp) || !absl::SimpleAtoi(f[11], &utime) ||
      !absl::SimpleAtoi(f[12], &stime) || !absl::SimpleAtoi(f[21], &rss)) {
    return false;
  }
  out->exited = f[0] == "Z" || f[0] == "X";
  out->pgrp = static_cast<pid_t>(pgrp);
  out->cpu_seconds = static_cast<double>(utime + stime) / ticks;
  out->rss_bytes = rss * page;
  return true;
}

}  // namespace

ProcessGroupSampler::ProcessGroupSampler(pid_t pgid) : pgid_(pgid) {}

ProcessSample ProcessGroupSampler::Sample(absl::Time now) {
  ProcessSample s;
  double cpu = 0;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return s;
  while (dirent* d = ::readdir(dir)) {
    if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
    ProcStat st;
    if (!ReadProcStat(d->d_name, &st) || st.pgrp != pgid_ || st.exited) continue;
    ++s.processes;
    cpu += st.cpu_seconds;
    s.rss_bytes += st.rss_bytes;
  }
  ::closedir(dir);
  if (last_cpu_seconds_ >= 0 && now > last_time_) {
    // Processes that exited since the last sample take their time with them; never go negative.
    s.cpu_percent =
        std::max(0.0, 100.0 * (cpu - last_cpu_seconds_) / absl::ToDoubleSeconds(now - last_time_));
  }
  last_cpu_seconds_ = cpu;
  last_time_ = now;
  return s;
}

// The few NVML entry points we use, with their C signatures (nvml.h is not needed to build).
struct GpuMonitor::Api {
  struct Utilization {
    unsigned int gpu, memory;
  };
  struct Memory {
    unsigned long long total, free, used;
  };
  using Device = void*;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned int*) = nullptr;
  int (*handle)(unsigned int, Device*) = nullptr;
  int (*utilization)(Device, Utilization*) = nullptr;
  int (*memory)(Device, Memory*) = nullptr;
};

absl::StatusOr<std::unique_ptr<GpuMonitor>> GpuMonitor::Open() {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    return absl::UnavailableError(absl::StrCat("NVML not available: ", ::dlerror()));
  }
  auto api = std::make_unique<Api>();
  auto load = [&](auto* fn, const char* name) {
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(::dlsym(lib, name));
    return *fn != nullptr;
  };
  bool ok = load(&api->init, "nvmlInit_v2") && load(&api->shutdown, "nvmlShutdown") &&
            load(&api->count, "nvmlDeviceGetCount_v2") &&
            load(&api->handle, "nvmlDeviceGetHandleByIndex_v2") &&
            load(&api->utilization, "nvmlDeviceGetUtilizationRates") &&
            load(&api->memory, "nvmlDeviceGetMemoryInfo");
  unsigned int count = 0;
  if (!ok || api->init() != 0) {
    ::dlclose(lib);
    return absl::UnavailableError("NVML could not be initialised (no NVIDIA driver?)");
  }
  if (api->count(&count) != 0 || count == 0) {
    api->shutdown();
    ::dlclose(lib);
    return absl::UnavailableError("NVML sees no GPU");
  }
  return std::unique_ptr<GpuMonitor>(new GpuMonitor(lib, std::move(api), static_cast<int>(count)));
}

GpuMonitor::GpuMonitor(void* lib, std::unique_ptr<Api> api, int count)
    : lib_(lib), api_(std::move(api)), count_(count) {}

GpuMonitor::~GpuMonitor() {
  api_->shutdown();
  ::dlclose(lib_);
}

GpuSample GpuMonitor::Sample(const std::vector<int>& indices) const {
  std::vector<int> all;
  const std::vector<int>* which = &indices;
  if (indices.empty()) {
    for (int i = 0; i < count_; ++i) all.push_back(i);
    which = &all;
  }
  GpuSample s;
  double util = 0;
  for (int i : *which) {
    Api::Device dev = nullptr;
    Api::Utilization u{};
    Api::Memory m{};
    if (i < 0 || i >= count_ || api_->handle(static_cast<unsigned>(i), &dev) != 0) continue;
    if (api_->utilization(dev, &u) != 0 || api_->memory(dev, &m) != 0) continue;
    ++s.count;
    util += u.gpu;
    s.memory_used_bytes += static_cast<int64_t>(m.used);
    s.memory_total_bytes += static_cast<int64_t>(m.total);
  }
  if (s.count > 0) s.utilization_percent = util / s.count;
  return s;
}

absl::StatusOr<std::vector<int>> ParseDeviceList(const std::string& text) {
  std::vector<int> out;
  if (text.empty()) return out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int v;
    if (!absl::SimpleAtoi(part, &v) || v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPU list '", text, "': '", part, "' is not a device index"));
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace sextant
