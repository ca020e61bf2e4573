// tampering-aggregator: `sextant-worker --role aggregator` as an attacker who runs a region's
// aggregator would modify it. The same program (RunFederatedMain, the same flags), with one gRPC
// interceptor on the server its clients reach:
// - each SecAgg key directory it sends (SecAggAwait, stage 1) has one peer's masking key
//   swapped for a key of the aggregator's choosing: the first peer that is not the recipient;
// - it prints what it did, and every SecAgg message its clients submit, one line each on
//   stdout (`tampered client=ID peer=ID`, `submit client=ID stage=S`), so that a test can tell
//   what the clients revealed after they were handed the swapped key.
// A test tool: it is built with the tests and installed nowhere.
#include <signal.h>

#include <atomic>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/process_setup.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/server_interceptor.h"
#include "sextant/v1/federation_service.pb.h"
#include "worker/federated/federated_main.h"

namespace {

std::atomic<bool> g_stop{false};
std::mutex g_out;

void Say(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_out);
  std::cout << line << std::endl;
}

bool EndsWith(const char* s, const char* suffix) {
  const size_t n = std::strlen(s), m = std::strlen(suffix);
  return n >= m && std::strcmp(s + n - m, suffix) == 0;
}

class Tamperer : public grpc::experimental::Interceptor {
 public:
  explicit Tamperer(grpc::experimental::ServerRpcInfo* info)
      : await_(EndsWith(info->method(), "/SecAggAwait")),
        submit_(EndsWith(info->method(), "/SecAggSubmit")) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (submit_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (const auto* m = static_cast<const sextant::v1::SecAggMessage*>(methods->GetRecvMessage())) {
        Say("submit client=" + m->client_id() + " stage=" + std::to_string(m->stage()));
      }
    }
    if (await_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      if (Read(methods) && message_.has_directory()) Swap(methods);
    }
    methods->Proceed();
  }

 private:
  // The reply about to go out, into message_, in whichever form gRPC holds it.
  bool Read(grpc::experimental::InterceptorBatchMethods* methods) {
    if (const void* m = methods->GetSendMessage()) {
      message_ = *static_cast<const sextant::v1::SecAggMessage*>(m);
      return true;
    }
    grpc::ByteBuffer* buffer = methods->GetSerializedSendMessage();
    std::vector<grpc::Slice> slices;
    if (buffer == nullptr || !buffer->Dump(&slices).ok()) return false;
    std::string bytes;
    for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    return message_.ParseFromString(bytes);
  }

  void Swap(grpc::experimental::InterceptorBatchMethods* methods) {
    for (sextant::v1::SecAggPeer& peer : *message_.mutable_directory()->mutable_peers()) {
      if (peer.client_id() == message_.client_id()) continue;
      peer.set_masking_key(std::string(32, '\x5a'));  // the aggregator's pick
      Say("tampered client=" + message_.client_id() + " peer=" + peer.client_id());
      methods->ModifySendMessage(&message_);
      return;
    }
  }

  const bool await_, submit_;
  sextant::v1::SecAggMessage message_;  // lives until the reply is serialized
};

class TampererFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new Tamperer(info);
  }
};

void OnSignal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  sextant::SetUpProcess();
  sextant::InstallSignalHandlers(OnSignal);
  return sextant::RunFederatedMain(argc, argv, sextant::RealClockInstance(), &g_stop, [] {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> v;
    v.push_back(std::make_unique<TampererFactory>());
    return v;
  });
}
