#include "worker/federated/federated_main.h"

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "aggregator/regional_aggregator.h"
#include "federation/secure_quantizer.h"
#include "rpc/channel_credentials.h"
#include "rpc/key_signer.h"
#include "rpc/run_secret.h"
#include "rpc/server_security.h"
#include "worker/federated/evaluator.h"
#include "worker/federated/federated_client.h"
#include "worker/federated/federated_job.h"

namespace sextant {
namespace {

// --flag value pairs; false (with a message) on a dangling or unknown flag.
bool ParseFlags(int argc, char** argv, std::map<std::string, std::string>* flags) {
  static const char* kKnown[] = {"--role", "--region", "--connect", "--experiment-id", "--index",
                                 "--spec", "--threads", "--model-size", "--work-dir", "--listen",
                                 "--port-file", "--chunk-floats", "--aggregation",
                                 "--trim-fraction", "--byzantine", "--krum-selected",
                                 "--tls-dir", "--tls-name", "--secure-aggregation",
                                 "--secagg-clip", "--secagg-bits", "--secagg-max-weight",
                                 "--secagg-stage-timeout", "--hide-region-sum",
                                 "--secagg-ring-clients", "--clients", "--startup-wait",
                                 "--max-client-weight", "--secret-file"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--exit-with-parent") continue;
    bool known = false;
    for (const char* k : kKnown) known = known || a == k;
    if (!known || i + 1 >= argc) {
      std::cerr << "sextant-worker: " << (known ? "missing value for " : "unknown argument ") << a
                << "\n";
      return false;
    }
    (*flags)[a] = argv[++i];
  }
  return true;
}

// --tls-name, or the role's own certificate and token.
std::string TlsName(std::map<std::string, std::string>& f, const std::string& role) {
  return f["--tls-name"].empty() ? role : f["--tls-name"];
}

// With --tls-dir an aggregator dials upstream and serves its clients as the orchestrator does:
// TLS, mTLS against the CA and enrolled.txt, identities or per-role bearer tokens; without it,
// it may listen on loopback only, and with --secret-file both its server and its upstream
// channel need the run's secret. Returns an exit code.
int AggregatorSecurity(std::map<std::string, std::string>& f, RegionalAggregatorOptions* o) {
  ServerSecurity security;
  if (f["--tls-dir"].empty() && !f["--secret-file"].empty()) {
    absl::StatusOr<std::string> secret = ReadSecretFile(f["--secret-file"]);
    if (!secret.ok()) {
      std::cerr << "sextant-worker: --secret-file: " << secret.status().message() << "\n";
      return 2;
    }
    security = LoopbackSecurity(*secret);
    o->upstream_credentials = LoopbackChannelCredentials(*secret);
    o->server_credentials = MakeServerCredentials(security);
  } else if (!f["--tls-dir"].empty()) {
    auto loaded = LoadServerSecurity(f["--tls-dir"], TlsName(f, "aggregator"));
    auto creds = LoadChannelCredentials(f["--tls-dir"], TlsName(f, "aggregator"));
    if (!loaded.ok() || !creds.ok()) {
      std::cerr << "sextant-worker: --tls-dir: "
                << (loaded.ok() ? creds.status() : loaded.status()).message() << "\n";
      return 2;
    }
    security = *std::move(loaded);
    o->upstream_credentials = *creds;
    o->server_credentials = MakeServerCredentials(security);
    absl::StatusOr<std::unique_ptr<KeySigner>> signer =
        KeySigner::Load(f["--tls-dir"], TlsName(f, "aggregator"));
    if (!signer.ok()) {
      std::cerr << "sextant-worker: --tls-dir: " << signer.status().message() << "\n";
      return 2;
    }
    o->signer = *std::move(signer);
  }
  if (absl::Status s = CheckListenAllowed(o->listen, security); !s.ok()) {
    std::cerr << "sextant-worker: " << s.message() << "\n";
    return 2;
  }
  return 0;
}

// The experiment in --spec (a serialized ExperimentSpec); false, with a message, when it
// cannot be read.
bool ReadSpec(std::map<std::string, std::string>& f, v1::ExperimentSpec* spec) {
  std::ifstream in(f["--spec"], std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  if (!in || !spec->ParseFromString(buf.str())) {
    std::cerr << "sextant-worker: cannot read the experiment from " << f["--spec"] << "\n";
    return false;
  }
  return true;
}

int RunClient(std::map<std::string, std::string>& f, const std::atomic<bool>* stop) {
  v1::ExperimentSpec spec;
  if (!ReadSpec(f, &spec)) return 2;
  FederatedClientOptions o;
  o.target = f["--connect"];
  o.experiment_id = f["--experiment-id"];
  o.region = f["--region"];
  if (!absl::SimpleAtoi(f["--index"], &o.index)) {
    std::cerr << "sextant-worker: --index takes an integer\n";
    return 2;
  }
  if (f.count("--threads")) (void)absl::SimpleAtoi(f["--threads"], &o.threads);
  if (f.count("--chunk-floats")) (void)absl::SimpleAtoi(f["--chunk-floats"], &o.chunk_floats);
  absl::StatusOr<int> global = GlobalClientIndex(spec.federation(), o.region, o.index);
  absl::StatusOr<FederatedJob> job = FederatedJobFromSpec(spec);
  if (!global.ok() || !job.ok()) {
    std::cerr << "sextant-worker: " << (global.ok() ? job.status() : global.status()) << "\n";
    return 2;
  }
  o.global_index = *global;
  o.job = *job;
  o.log = &std::cout;
  if (f.count("--work-dir")) o.work_dir = f["--work-dir"];
  auto creds = LoadChannelCredentials(f["--tls-dir"], TlsName(f, "worker"), f["--secret-file"]);
  if (!creds.ok()) {
    std::cerr << "sextant-worker: " << (f["--tls-dir"].empty() ? "--secret-file" : "--tls-dir")
              << ": " << creds.status().message() << "\n";
    return 2;
  }
  o.credentials = *creds;
  if (!f["--tls-dir"].empty()) {
    absl::StatusOr<std::unique_ptr<KeySigner>> signer =
        KeySigner::Load(f["--tls-dir"], TlsName(f, "worker"));
    if (!signer.ok()) {
      std::cerr << "sextant-worker: --tls-dir: " << signer.status().message() << "\n";
      return 2;
    }
    o.signer = *std::move(signer);
  }
  absl::StatusOr<train::FashionMnist> data =
      train::LoadFashionMnist(o.job.dataset_dir, o.job.validation_examples, o.job.seed);
  if (!data.ok()) {
    std::cerr << "sextant-worker: " << data.status() << "\n";
    return 1;
  }
  absl::StatusOr<FederatedClientStats> stats = RunFederatedClient(o, *data, stop);
  if (!stats.ok()) {
    std::cerr << "sextant-worker: " << stats.status() << "\n";
    return 1;
  }
  std::cout << "client_done rounds=" << stats->rounds << " bytes_sent=" << stats->bytes_sent
            << " model_bytes=" << stats->model_floats * 4 << " examples=" << stats->examples << "\n";
  return 0;
}

// The global tier's evaluator: the experiment's model on its validation split.
int RunEvaluatorRole(std::map<std::string, std::string>& f, const std::atomic<bool>* stop) {
  v1::ExperimentSpec spec;
  if (!ReadSpec(f, &spec)) return 2;
  absl::StatusOr<FederatedJob> job = FederatedJobFromSpec(spec);
  if (!job.ok()) {
    std::cerr << "sextant-worker: " << job.status() << "\n";
    return 2;
  }
  EvaluatorOptions o;
  o.job = *job;
  o.dir = f["--work-dir"];
  if (o.dir.empty()) {
    std::cerr << "sextant-worker: an evaluator needs --work-dir DIR\n";
    return 2;
  }
  if (f.count("--threads")) (void)absl::SimpleAtoi(f["--threads"], &o.threads);
  absl::Status s = RunEvaluator(o, stop);
  if (!s.ok()) {
    std::cerr << "sextant-worker: evaluator: " << s << "\n";
    return 1;
  }
  return 0;
}

int RunAggregator(std::map<std::string, std::string>& f, const std::atomic<bool>* stop) {
  RegionalAggregatorOptions o;
  o.upstream = f["--connect"];
  o.experiment_id = f["--experiment-id"];
  o.region = f["--region"];
  o.work_dir = f["--work-dir"];
  if (f.count("--listen")) o.listen = f["--listen"];
  o.port_file = f["--port-file"];
  if (!absl::SimpleAtoi(f["--model-size"], &o.model_size) || o.model_size <= 0 ||
      o.work_dir.empty()) {
    std::cerr << "sextant-worker: an aggregator needs --model-size N and --work-dir DIR\n";
    return 2;
  }
  if (f.count("--chunk-floats")) (void)absl::SimpleAtoi(f["--chunk-floats"], &o.chunk_floats);
  double trim = 0.1;
  int64_t byzantine = 1, selected = 0;
  if ((f.count("--trim-fraction") && !absl::SimpleAtod(f["--trim-fraction"], &trim)) ||
      (f.count("--byzantine") && !absl::SimpleAtoi(f["--byzantine"], &byzantine)) ||
      (f.count("--krum-selected") && !absl::SimpleAtoi(f["--krum-selected"], &selected))) {
    std::cerr << "sextant-worker: --trim-fraction takes a number, --byzantine and --krum-selected "
                 "integers\n";
    return 2;
  }
  absl::StatusOr<AggregationRule> rule =
      MakeAggregationRule(f["--aggregation"], trim, byzantine, selected);
  if (!rule.ok()) {
    std::cerr << "sextant-worker: " << rule.status().message() << "\n";
    return 2;
  }
  o.rule = *rule;
  o.secure_aggregation = f["--secure-aggregation"] == "1" || f["--secure-aggregation"] == "true";
  if ((f.count("--secagg-clip") && !absl::SimpleAtod(f["--secagg-clip"], &o.quantization.clip)) ||
      (f.count("--secagg-bits") && !absl::SimpleAtoi(f["--secagg-bits"], &o.quantization.bits)) ||
      (f.count("--secagg-max-weight") &&
       !absl::SimpleAtoi(f["--secagg-max-weight"], &o.quantization.max_weight)) ||
      (f.count("--secagg-stage-timeout") &&
       !absl::SimpleAtod(f["--secagg-stage-timeout"], &o.stage_timeout_seconds))) {
    std::cerr << "sextant-worker: --secagg-clip and --secagg-stage-timeout take numbers, "
                 "--secagg-bits and --secagg-max-weight integers\n";
    return 2;
  }
  int64_t clients = 0;
  if ((f.count("--clients") && (!absl::SimpleAtoi(f["--clients"], &clients) || clients < 0)) ||
      (f.count("--startup-wait") &&
       (!absl::SimpleAtod(f["--startup-wait"], &o.startup_wait_seconds) ||
        !(o.startup_wait_seconds >= 0)))) {
    std::cerr << "sextant-worker: --clients takes an integer >= 0, --startup-wait seconds >= 0\n";
    return 2;
  }
  if (f.count("--max-client-weight") &&
      (!absl::SimpleAtod(f["--max-client-weight"], &o.max_client_weight) ||
       !(o.max_client_weight >= 0))) {
    std::cerr << "sextant-worker: --max-client-weight takes a number >= 0\n";
    return 2;
  }
  for (int64_t i = 0; i < clients; ++i) o.clients.push_back(ClientId(o.region, static_cast<int>(i)));
  o.hide_region_sum = f["--hide-region-sum"] == "1" || f["--hide-region-sum"] == "true";
  if (f.count("--secagg-ring-clients") &&
      !absl::SimpleAtoi(f["--secagg-ring-clients"], &o.ring_clients)) {
    std::cerr << "sextant-worker: --secagg-ring-clients takes an integer\n";
    return 2;
  }
  if (o.hide_region_sum && !o.secure_aggregation) {
    std::cerr << "sextant-worker: --hide-region-sum needs --secure-aggregation 1\n";
    return 2;
  }
  if (o.secure_aggregation) {
    SecureQuantizerOptions q{o.quantization.clip, o.quantization.bits, o.quantization.max_weight,
                             2, 0};
    if (absl::Status s = SecureQuantizer::Create(q).status(); !s.ok()) {
      std::cerr << "sextant-worker: " << s.message() << "\n";
      return 2;
    }
  }
  o.log = &std::cout;
  if (int rc = AggregatorSecurity(f, &o); rc != 0) return rc;
  absl::Status s = RunRegionalAggregator(o, stop);
  if (!s.ok()) {
    std::cerr << "sextant-worker: " << s << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

bool IsFederatedInvocation(int argc, char** argv) {
  bool aggregator = false, client = false, spec = false;
  for (int i = 1; i + 1 < argc; ++i) {
    std::string a = argv[i], v = argv[i + 1];
    aggregator = aggregator || (a == "--role" && (v == "aggregator" || v == "evaluator"));
    client = client || (a == "--role" && v == "client");
    spec = spec || a == "--spec";
  }
  return aggregator || (client && spec);
}

int RunFederatedMain(int argc, char** argv, const std::atomic<bool>* stop) {
  std::map<std::string, std::string> f;
  if (!ParseFlags(argc, argv, &f)) return 2;
  if (f["--role"] == "evaluator") return RunEvaluatorRole(f, stop);
  for (const char* required : {"--region", "--connect", "--experiment-id"}) {
    if (f[required].empty()) {
      std::cerr << "sextant-worker: " << required << " is required for a federated role\n";
      return 2;
    }
  }
  return f["--role"] == "aggregator" ? RunAggregator(f, stop) : RunClient(f, stop);
}

}  // namespace sextant
