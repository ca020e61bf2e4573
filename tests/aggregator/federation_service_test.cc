// FederationService on loopback over a real FederationHub: what an aggregator reports upstream
// travels with its update, and a sender that breaks off mid-stream frees the staging buffer.
#include "aggregator/federation_service.h"

#include <dirent.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/federation_calls.h"
#include "aggregator/federation_hub.h"
#include "common/clock.h"
#include "federation/round_coordinator.h"
#include "gtest/gtest.h"
#include "tests/fakes/clock_ticker.h"

namespace sextant {
namespace {

class FederationServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Serve(1 << 18); }
  // Serves round 1 for east and west from a hub whose senders must stage at least
  // min_floats_per_second while another waits (FederationHub).
  void Serve(double min_floats_per_second) {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    RoundCoordinatorOptions o;
    o.experiment_id = "exp";
    o.model_size = kSize;
    hub_ = std::make_unique<FederationHub>(*RoundCoordinator::Create(o, &clock_), &clock_,
                                           absl::Seconds(5), min_floats_per_second);
    service_ = std::make_unique<FederationServiceImpl>(hub_.get(), /*chunk_floats=*/4);
    int port = 0;
    server_ = *StartFederationServer("127.0.0.1:0", service_.get(), &port);
    stub_ = v1::FederationService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                               grpc::InsecureChannelCredentials()));
    std::map<std::string, RoundTask> tasks;
    for (const char* id : {"east", "west"}) tasks[id].model_size = kSize;
    ASSERT_TRUE(hub_->Publish(1, "/dev/null", std::move(tasks)).ok());
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now()); }

  static constexpr int64_t kSize = 10;
  FakeClock clock_;  // moves only when a test says: no round deadline runs here
  std::unique_ptr<FederationHub> hub_;
  std::unique_ptr<FederationServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::FederationService::Stub> stub_;
};

// Join answers by the caller's certificate identity only: none here (plaintext), and no
// handler set, so no plan is given either way.
TEST_F(FederationServiceTest, JoiningTakesACertificateIdentity) {
  absl::StatusOr<v1::JoinPlan> plan = JoinUpstream(stub_.get(), "exp", 5);
  EXPECT_TRUE(absl::IsPermissionDenied(plan.status())) << plan.status();
  service_->SetJoinHandler([](const PeerIdentity&, const std::string&) { return v1::JoinPlan(); });
  plan = JoinUpstream(stub_.get(), "exp", 5);
  EXPECT_TRUE(absl::IsPermissionDenied(plan.status())) << plan.status();
}

// Every participant that asked for a round is told the run ended before the server goes.
TEST_F(FederationServiceTest, AllThatAskedHearTheEnd) {
  ASSERT_TRUE(hub_->WaitForRound("exp", "east", 1, absl::ZeroDuration()).ok());
  ASSERT_TRUE(hub_->WaitForRound("exp", "west", 1, absl::ZeroDuration()).ok());
  hub_->SetDone();
  {
    ClockTicker ticker(&clock_, absl::Milliseconds(5));  // the waits below time out on it
    EXPECT_FALSE(hub_->WaitUntilAllHeardDone(absl::Milliseconds(50)));
    EXPECT_EQ(hub_->WaitForRound("exp", "east", 1, absl::ZeroDuration())->kind,
              RoundTask::Kind::kDone);
    EXPECT_FALSE(hub_->WaitUntilAllHeardDone(absl::Milliseconds(50)));
  }
  std::thread west([&] { (void)hub_->WaitForRound("exp", "west", 1, absl::Seconds(5)); });
  EXPECT_TRUE(hub_->WaitUntilAllHeardDone(absl::Seconds(5)));
  west.join();
}

TEST_F(FederationServiceTest, RegionsRejectionsAndCountTravelWithTheirUpdate) {
  std::vector<float> update(kSize, 1.0f);
  PushHeader east{"exp", 1, "east", 30, 3, {}, /*rejected=*/2};
  PushHeader west{"exp", 1, "west", 10, 1, {}, /*rejected=*/0};
  ASSERT_TRUE(PushUpdate(stub_.get(), east, update, 4).ok());
  ASSERT_TRUE(PushUpdate(stub_.get(), west, update, 4).ok());
  ASSERT_TRUE(hub_->WaitReadyToClose(absl::Seconds(5)));
  std::vector<SenderReport> senders;
  absl::StatusOr<RoundOutcome> out = hub_->Close(&senders);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->count, 4);
  ASSERT_EQ(senders.size(), 2u);
  EXPECT_EQ(senders[0].client_id, "east");
  EXPECT_EQ(senders[0].rejected, 2);
  EXPECT_EQ(senders[1].rejected, 0);
}

// A participant that reports its failure is not waited for: the round closes on the others,
// and the failure is kept, once, for the tier's owner to show.
TEST_F(FederationServiceTest, AFailedParticipantIsNotWaitedForAndItsFailureIsKept) {
  std::vector<float> update(kSize, 1.0f);
  ASSERT_TRUE(PushUpdate(stub_.get(), PushHeader{"exp", 1, "east", 30, 3}, update, 4).ok());
  {
    ClockTicker ticker(&clock_, absl::Milliseconds(5));
    EXPECT_FALSE(hub_->WaitReadyToClose(absl::Milliseconds(50)));  // west is still awaited
  }
  EXPECT_TRUE(hub_->FailedParticipants().empty());
  ASSERT_TRUE(ReportFailure(stub_.get(), "exp", 1, "west", "west", "its secure round failed").ok());
  // What a regional aggregator withdraws from the SecAgg round it opens after the report.
  EXPECT_EQ(hub_->FailedParticipants(), std::vector<std::string>{"west"});
  ASSERT_TRUE(ReportFailure(stub_.get(), "exp", 1, "west", "west", "again").ok());  // said once
  {
    // A replacement asking in west's place (its instance taken back) is not handed the round
    // west left: it waits for the next. (Handed the round, it would read the model, /dev/null
    // here, and fail, as east does.)
    ClockTicker ticker(&clock_, absl::Milliseconds(5));
    auto sink = [](int64_t, absl::Span<const float>) { return absl::OkStatus(); };
    absl::StatusOr<RoundTask> west = PullRound(stub_.get(), "exp", "west", -1, 0.05, sink);
    ASSERT_TRUE(west.ok()) << west.status();
    EXPECT_EQ(west->kind, RoundTask::Kind::kWait);
    EXPECT_TRUE(absl::IsDataLoss(PullRound(stub_.get(), "exp", "east", -1, 0.05, sink).status()));
  }
  EXPECT_TRUE(hub_->WaitReadyToClose(absl::Seconds(5)));
  const RoundProgress progress = hub_->Progress();
  EXPECT_EQ(progress.delivered, 1);
  EXPECT_EQ(progress.failed, 1);
  std::vector<FailureReport> failures = hub_->TakeFailures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].round, 1);
  EXPECT_EQ(failures[0].failed, "west");
  EXPECT_EQ(failures[0].error, "its secure round failed");
  EXPECT_TRUE(hub_->TakeFailures().empty());
  // A participant that delivered cannot take its update back.
  EXPECT_TRUE(
      absl::IsFailedPrecondition(ReportFailure(stub_.get(), "exp", 1, "east", "east", "late")));
  absl::StatusOr<RoundOutcome> out = hub_->Close(nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->count, 3);
}

TEST_F(FederationServiceTest, ARoundWhoseParticipantsAllFailedClosesWithNothing) {
  ASSERT_TRUE(ReportFailure(stub_.get(), "exp", 1, "east", "east", "x").ok());
  ASSERT_TRUE(ReportFailure(stub_.get(), "exp", 1, "west", "west", "y").ok());
  EXPECT_TRUE(hub_->WaitReadyToClose(absl::Seconds(5)));
  absl::StatusOr<RoundOutcome> out = hub_->Close(nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(out.status())) << out.status();
}

// Failure reports are bounded and checked before anything is kept.
TEST_F(FederationServiceTest, FailureReportsAreCheckedAndBounded) {
  auto raw = [&](const std::string& experiment, int64_t round, const std::string& sender,
                 const std::string& failed, const std::string& error) {
    v1::ParticipantFailure request;
    request.set_experiment_id(experiment);
    request.set_round(round);
    request.set_client_id(sender);
    request.set_failed(failed);
    request.set_error(error);
    grpc::ClientContext context;
    v1::FailureReceipt reply;
    return stub_->ReportFailure(&context, request, &reply).error_code();
  };
  EXPECT_EQ(raw("exp", 1, "east", "east", std::string(kMaxFailureErrorBytes + 1, 'x')),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(raw("other", 1, "east", "east", "x"), grpc::StatusCode::ABORTED);
  EXPECT_EQ(raw("exp", 7, "east", "east", "x"), grpc::StatusCode::ABORTED);
  EXPECT_EQ(raw("exp", 1, "south", "south", "x"), grpc::StatusCode::FAILED_PRECONDITION);
  // A region speaks for its own sampled clients only.
  EXPECT_EQ(raw("exp", 1, "west", "east/0", "x"), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(raw("exp", 1, "west", "west/0", "x"), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(hub_->TakeFailures().empty());
  EXPECT_EQ(hub_->Progress().failed, 0);
  // The client helper keeps the end of a long error, where a stderr tail is.
  std::map<std::string, RoundTask> tasks;
  tasks["west"].model_size = kSize;
  tasks["west"].participants = {"west/0"};
  ASSERT_TRUE(hub_->Publish(2, "/dev/null", std::move(tasks)).ok());
  const std::string error = std::string(10000, 'a') + "ModuleNotFoundError";
  ASSERT_TRUE(ReportFailure(stub_.get(), "exp", 2, "west", "west/0", error).ok());
  std::vector<FailureReport> failures = hub_->TakeFailures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].error.size(), kMaxFailureErrorBytes);
  EXPECT_EQ(failures[0].error.substr(kMaxFailureErrorBytes - 19), "ModuleNotFoundError");
  EXPECT_EQ(hub_->Progress().failed, 0);  // a relayed client's failure is news only
}

// A compressed update is decoded to float32 before the hub folds it, so the mean is that of the
// decoded values; int8 and fp16 move fewer bytes than float32.
TEST_F(FederationServiceTest, CompressedUpdatesAreDecodedBeforeTheyAreFolded) {
  std::vector<float> x(kSize);
  for (int64_t i = 0; i < kSize; ++i) x[i] = 0.1f * static_cast<float>(i) - 0.3f;
  const std::vector<int64_t> segments = {6, 4};
  absl::StatusOr<EncodedUpdate> int8 = EncodeUpdate(x, segments, UpdateCompression::kInt8, 1);
  absl::StatusOr<EncodedUpdate> fp16 = EncodeUpdate(x, segments, UpdateCompression::kF16, 1);
  ASSERT_TRUE(int8.ok() && fp16.ok());
  absl::StatusOr<int64_t> east = PushUpdate(stub_.get(), {"exp", 1, "east", 1, 1, {}}, *int8, 4);
  absl::StatusOr<int64_t> west = PushUpdate(stub_.get(), {"exp", 1, "west", 1, 1, {}}, *fp16, 4);
  ASSERT_TRUE(east.ok()) << east.status();
  ASSERT_TRUE(west.ok()) << west.status();
  std::vector<SenderReport> senders;
  absl::StatusOr<RoundOutcome> out = hub_->Close(&senders);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> a = *DecodeUpdate(*int8), b = *DecodeUpdate(*fp16);
  for (int64_t i = 0; i < kSize; ++i) EXPECT_FLOAT_EQ(out->mean[i], (a[i] + b[i]) / 2) << i;
}

TEST_F(FederationServiceTest, AMalformedCompressedUpdateIsRefusedAndFreesTheStagingBuffer) {
  std::vector<float> x(kSize, 0.5f);
  absl::StatusOr<EncodedUpdate> e = EncodeUpdate(x, {{kSize}}, UpdateCompression::kInt8, 1);
  ASSERT_TRUE(e.ok());
  EncodedUpdate bad_header = *e;
  bad_header.scales.push_back(1);  // two scales for one segment: refused before staging
  EXPECT_EQ(PushUpdate(stub_.get(), {"exp", 1, "east", 1, 1, {}}, bad_header, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EncodedUpdate bad_code = *e;
  bad_code.payload[kSize - 1] = '\x80';  // -128, in the update's last chunk
  EXPECT_EQ(PushUpdate(stub_.get(), {"exp", 1, "east", 1, 1, {}}, bad_code, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Neither holds the staging buffer: west's update goes through at once.
  ASSERT_TRUE(PushUpdate(stub_.get(), {"exp", 1, "west", 1, 1, {}}, *e, 4).ok());
}

// A round that carries the model's tensors holds int8 updates to them: scales cut along other
// boundaries are refused before anything is staged.
TEST_F(FederationServiceTest, AnInt8UpdateCutAlongOtherTensorsThanTheModelsIsRefused) {
  std::map<std::string, RoundTask> tasks;
  for (const char* id : {"east", "west"}) {
    tasks[id].model_size = kSize;
    tasks[id].segments = {6, 4};
  }
  ASSERT_TRUE(hub_->Publish(2, "/dev/null", std::move(tasks)).ok());
  EXPECT_EQ(hub_->RoundSegments(), (std::vector<int64_t>{6, 4}));
  std::vector<float> x(kSize, 0.25f);
  absl::StatusOr<EncodedUpdate> other = EncodeUpdate(x, {{4, 6}}, UpdateCompression::kInt8, 1);
  absl::StatusOr<EncodedUpdate> model = EncodeUpdate(x, {{6, 4}}, UpdateCompression::kInt8, 1);
  ASSERT_TRUE(other.ok() && model.ok());
  absl::StatusOr<int64_t> refused =
      PushUpdate(stub_.get(), {"exp", 2, "east", 1, 1, {}}, *other, 4);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("not the model's 2 tensors"), std::string::npos)
      << refused.status();
  ASSERT_TRUE(PushUpdate(stub_.get(), {"exp", 2, "east", 1, 1, {}}, *model, 4).ok());
}

// A participant counts as up once it has asked for a round (GetRound), whether or not it is in
// the open one; a caller for another experiment does not count.
TEST_F(FederationServiceTest, WaitForContactReturnsThoseThatHaveNotAskedForARound) {
  const std::vector<std::string> ids = {"east", "west", "north"};
  auto noop = [](int64_t, absl::Span<const float>) { return absl::OkStatus(); };
  {
    ClockTicker ticker(&clock_, absl::Milliseconds(5));  // the waits below time out on it
    EXPECT_EQ(hub_->WaitForContact(ids, absl::Milliseconds(50)), ids);
    // "east" is in round 1 (its model read fails on the empty file; it has asked all the same).
    (void)PullRound(stub_.get(), "exp", "east", 0, 0.1, noop);
    (void)PullRound(stub_.get(), "other", "west", 0, 0.1, noop);
    EXPECT_EQ(hub_->WaitForContact(ids, absl::Milliseconds(50)),
              (std::vector<std::string>{"west", "north"}));
  }
  // A waiter wakes when the last one asks.
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    (void)PullRound(stub_.get(), "exp", "west", 0, 0.1, noop);
    (void)PullRound(stub_.get(), "exp", "north", 0, 0.1, noop);  // not in the round: waits
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(hub_->WaitForContact(ids, absl::Seconds(20)).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  late.join();
}

TEST_F(FederationServiceTest, SenderThatBreaksOffMidStreamFreesTheStagingBufferForOthers) {
  {
    grpc::ClientContext context;
    v1::UpdateReceipt receipt;
    auto writer = stub_->PushUpdate(&context, &receipt);
    v1::ModelChunk first;
    first.set_experiment_id("exp");
    first.set_round(1);
    first.set_client_id("east");
    first.set_total_size(kSize);
    first.set_weight(1);
    first.set_count(1);
    first.set_data(std::string(4 * sizeof(float), '\0'));
    ASSERT_TRUE(writer->Write(first));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // east now holds the buffer
    context.TryCancel();                                          // the sender dies
    (void)writer->Finish();
  }
  // Without the release west would wait for the staging buffer (Begin waits up to 600 s).
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> update(kSize, 2.0f);
  ASSERT_TRUE(PushUpdate(stub_.get(), {"exp", 1, "west", 1, 1, {}}, update, 4).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // east may retry its update in full, and it is not counted as a rejection.
  ASSERT_TRUE(
      PushUpdate(stub_.get(), {"exp", 1, "east", 1, 1, {}}, std::vector<float>(kSize, 4.0f), 4)
          .ok());
  EXPECT_EQ(hub_->rejections("east"), 0);
  std::vector<SenderReport> senders;
  absl::StatusOr<RoundOutcome> out = hub_->Close(&senders);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ(out->mean[0], 3.0f);
}

// A sender that trickles (a value every 3 s, never silent for the stall timeout) is cut off
// once its update has taken longer than the stall timeout plus its size at the hub's minimum
// rate (here 1 value a second: 5 + 10 s), so that it cannot hold the region's only staging
// buffer while an honest sender waits.
TEST_F(FederationServiceTest, ASenderThatTricklesIsCutOffForAWaitingOne) {
  Serve(/*min_floats_per_second=*/1);
  grpc::ClientContext context;
  v1::UpdateReceipt receipt;
  auto writer = stub_->PushUpdate(&context, &receipt);
  v1::ModelChunk chunk;
  chunk.set_experiment_id("exp");
  chunk.set_round(1);
  chunk.set_client_id("east");
  chunk.set_total_size(kSize);
  chunk.set_weight(1);
  chunk.set_count(1);
  const float one = 100.0f;
  chunk.set_data(reinterpret_cast<const char*>(&one), sizeof(float));
  ASSERT_TRUE(writer->Write(chunk));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // east holds the buffer
  chunk.clear_total_size();
  absl::Status west = absl::UnknownError("not done");
  std::atomic<bool> west_done{false};
  std::thread sender([&] {
    west = PushUpdate(stub_.get(), {"exp", 1, "west", 1, 1, {}}, std::vector<float>(kSize, 2.0f), 4)
               .status();
    west_done = true;
  });
  int sent = 1;
  for (; sent < kSize && !west_done.load(); ++sent) {
    clock_.Advance(absl::Seconds(3));
    chunk.set_offset(sent);
    if (!writer->Write(chunk)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  sender.join();
  ASSERT_TRUE(west.ok()) << west;
  EXPECT_EQ(hub_->stalled_senders(), 1);
  EXPECT_LE(sent, 7);  // cut off after 15 s of its 30 s trickle
  writer->WritesDone();
  grpc::Status east = writer->Finish();
  EXPECT_EQ(east.error_code(), grpc::StatusCode::ABORTED) << east.error_message();
  EXPECT_NE(east.error_message().find("slower in all than"), std::string::npos)
      << east.error_message();
}

// A sender that stops mid-update is cut off once it has been silent for the hub's stall timeout
// (5 s on the hub's clock) while another sender waits: the waiting one gets the staging
// buffer, the staller is counted, and its next chunk is refused (ABORTED). Nothing of it is
// folded in.
TEST_F(FederationServiceTest, ASenderThatStallsMidUpdateIsCutOffForAWaitingOne) {
  grpc::ClientContext context;
  v1::UpdateReceipt receipt;
  auto writer = stub_->PushUpdate(&context, &receipt);
  v1::ModelChunk chunk;
  chunk.set_experiment_id("exp");
  chunk.set_round(1);
  chunk.set_client_id("east");
  chunk.set_total_size(kSize);
  chunk.set_weight(1);
  chunk.set_count(1);
  const std::vector<float> part(4, 100.0f);
  chunk.set_data(reinterpret_cast<const char*>(part.data()), part.size() * sizeof(float));
  ASSERT_TRUE(writer->Write(chunk));
  std::this_thread::sleep_for(
      std::chrono::milliseconds(200));  // east holds the buffer, then stalls
  absl::Status west = absl::UnknownError("not done");
  std::atomic<bool> west_done{false};
  std::thread sender([&] {
    west = PushUpdate(stub_.get(), {"exp", 1, "west", 1, 1, {}}, std::vector<float>(kSize, 2.0f), 4)
               .status();
    west_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(west_done.load());  // west waits while east is within its timeout
  EXPECT_EQ(hub_->stalled_senders(), 0);
  clock_.Advance(absl::Seconds(6));
  sender.join();
  ASSERT_TRUE(west.ok()) << west;
  EXPECT_EQ(hub_->stalled_senders(), 1);
  // East wakes up and goes on: refused.
  chunk.clear_total_size();
  chunk.set_offset(4);
  writer->Write(chunk);
  writer->WritesDone();
  grpc::Status east = writer->Finish();
  EXPECT_EQ(east.error_code(), grpc::StatusCode::ABORTED) << east.error_message();
  EXPECT_NE(east.error_message().find("cut off"), std::string::npos) << east.error_message();
  // East may send its update again in full; only whole updates are folded.
  ASSERT_TRUE(
      PushUpdate(stub_.get(), {"exp", 1, "east", 1, 1, {}}, std::vector<float>(kSize, 4.0f), 4)
          .ok());
  absl::StatusOr<RoundOutcome> out = hub_->Close(nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ(out->mean[0], 3.0f);
}

// Threads of this process now.
int Threads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// One GetRound on the client's callback API (no thread of its own): counts its messages and
// keeps the kind of the assignment and the call's status.
class RoundReader : public grpc::ClientReadReactor<v1::ModelChunk> {
 public:
  RoundReader(v1::FederationService::Stub* stub, const std::string& client, double wait) {
    request_.set_experiment_id("exp");
    request_.set_client_id(client);
    request_.set_round(1);
    request_.set_wait_seconds(wait);
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stub->async()->GetRound(&context_, &request_, this);
    StartRead(&chunk_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (chunk_.has_assignment()) kind_ = chunk_.assignment().kind();
    StartRead(&chunk_);
  }
  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = s;
    done_ = true;
    cv_.notify_all();
  }
  grpc::Status Await() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return status_;
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  v1::RoundAssignment::Kind kind() const { return kind_; }
  void Cancel() { context_.TryCancel(); }

 private:
  grpc::ClientContext context_;
  v1::RoundRequest request_;
  v1::ModelChunk chunk_;
  std::atomic<v1::RoundAssignment::Kind> kind_{v1::RoundAssignment::WAIT};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  grpc::Status status_;
};

// Long-polls wait parked on the hub's WaitList, not each on a thread of the server: 300 callers
// that wait for a round leave the process's thread count about where it was, and each is
// answered the moment the run ends.
TEST_F(FederationServiceTest, WaitingCallsHoldNoThreadEach) {
  constexpr int kCallers = 300;
  const int before = Threads();
  std::vector<std::unique_ptr<RoundReader>> readers;
  for (int i = 0; i < kCallers; ++i) {
    readers.push_back(std::make_unique<RoundReader>(stub_.get(), "c" + std::to_string(i), 30));
  }
  // All of them are in and waiting (none is in the round).
  for (int i = 0; i < 200 && service_->quota().active() < kCallers; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(service_->quota().active(), kCallers);
  EXPECT_GE(hub_->waiters().parked(), static_cast<size_t>(kCallers) - 10);
  const int during = Threads();
  EXPECT_LT(during - before, 40) << before << " threads before, " << during << " while waiting";
  for (const auto& r : readers) EXPECT_FALSE(r->done());
  const auto start = std::chrono::steady_clock::now();
  hub_->SetDone();
  for (const auto& r : readers) {
    grpc::Status s = r->Await();
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(r->kind(), v1::RoundAssignment::DONE);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // The server lets each place go once its side of the call is done too.
  for (int i = 0; i < 200 && service_->quota().active() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(service_->quota().active(), 0);
  std::printf("threads: %d before, %d with %d calls waiting\n", before, during, kCallers);
}

// A server of the test's own, with the given call limits, over a hub of a `size`-float model.
class FederationServiceQuotaTest : public ::testing::Test {
 protected:
  void Serve(int64_t size, CallLimits limits) {
    RoundCoordinatorOptions o;
    o.experiment_id = "exp";
    o.model_size = size;
    hub_ = std::make_unique<FederationHub>(*RoundCoordinator::Create(o, &clock_), &clock_);
    service_ = std::make_unique<FederationServiceImpl>(hub_.get(), 4, nullptr, nullptr, limits);
    int port = 0;
    server_ = *StartFederationServer("127.0.0.1:0", service_.get(), &port);
    stub_ = v1::FederationService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                               grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }

  FakeClock clock_;
  std::unique_ptr<FederationHub> hub_;
  std::unique_ptr<FederationServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::FederationService::Stub> stub_;
};

// A server takes at most its calls' quota at once: one more is refused RESOURCE_EXHAUSTED at
// once, without harm to those it runs; a cancelled waiting call gives its place back.
TEST_F(FederationServiceQuotaTest, CallsBeyondTheQuotaAreRefusedAtOnce) {
  Serve(4, CallLimits{/*max_calls=*/3, 16});
  std::vector<std::unique_ptr<RoundReader>> waiting;
  for (int i = 0; i < 3; ++i) {
    waiting.push_back(std::make_unique<RoundReader>(stub_.get(), "c" + std::to_string(i), 30));
  }
  for (int i = 0; i < 200 && service_->quota().active() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(service_->quota().active(), 3);
  const auto start = std::chrono::steady_clock::now();
  RoundReader extra(stub_.get(), "c3", 30);
  grpc::Status refused = extra.Await();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("at most 3 calls"), std::string::npos)
      << refused.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(service_->quota().refused(), 1);
  // One waiting caller gives up: its place is free again, and the others still wait.
  waiting[0]->Cancel();
  EXPECT_EQ(waiting[0]->Await().error_code(), grpc::StatusCode::CANCELLED);
  for (int i = 0; i < 200 && service_->quota().active() > 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(service_->quota().active(), 2);
  RoundReader next(stub_.get(), "c4", 0);
  EXPECT_TRUE(next.Await().ok());
  EXPECT_EQ(next.kind(), v1::RoundAssignment::WAIT);
  EXPECT_FALSE(waiting[1]->done());
  hub_->SetDone();
  for (int i = 1; i < 3; ++i) EXPECT_TRUE(waiting[i]->Await().ok());
}

// Senders that wait for the staging buffer keep their first chunk meanwhile; what they keep in
// all is bounded (CallLimits::max_held_bytes), and a sender past it is refused at once rather
// than parked.
TEST_F(FederationServiceQuotaTest, WaitingSendersKeepAtMostTheHeldBytes) {
  Serve(8, CallLimits{/*max_calls=*/100, 16, /*max_held_bytes=*/60});
  std::map<std::string, RoundTask> tasks;
  for (const char* id : {"a", "b", "c"}) tasks[id].model_size = 8;
  ASSERT_TRUE(hub_->Publish(1, "/dev/null", std::move(tasks)).ok());
  auto first = [](const std::string& id) {
    v1::ModelChunk c;
    c.set_experiment_id("exp");
    c.set_round(1);
    c.set_client_id(id);
    c.set_total_size(8);
    c.set_weight(1);
    c.set_count(1);
    const std::vector<float> part(4, 1.0f);
    c.set_data(reinterpret_cast<const char*>(part.data()), part.size() * sizeof(float));
    return c;
  };
  // a and b each send their first chunk and pause: one takes the staging buffer, the other
  // waits for it, keeping its first chunk (about 40 bytes).
  std::promise<void> go;
  std::shared_future<void> resume = go.get_future().share();
  auto sender = [&](const std::string& id) {
    grpc::ClientContext context;
    v1::UpdateReceipt receipt;
    auto w = stub_->PushUpdate(&context, &receipt);
    v1::ModelChunk c = first(id);
    w->Write(c);
    resume.wait();
    c.clear_total_size();
    c.set_offset(4);
    w->Write(c);
    w->WritesDone();
    grpc::Status s = w->Finish();
    EXPECT_TRUE(s.ok()) << id << ": " << s.error_message();
  };
  std::thread a(sender, "a"), b(sender, "b");
  for (int i = 0; i < 500 && service_->quota().held() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(service_->quota().held(), 30);
  // c would keep as much again: past the bound, refused at once.
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::UpdateReceipt receipt;
    auto w = stub_->PushUpdate(&context, &receipt);
    w->Write(first("c"));
    w->WritesDone();
    grpc::Status s = w->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_NE(s.error_message().find("at most 60 in all"), std::string::npos) << s.error_message();
  }
  // Both go on: the holder completes, then the waiting one gets the buffer; what it kept is
  // given back with its call.
  go.set_value();
  a.join();
  b.join();
  for (int i = 0; i < 200 && service_->quota().held() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(service_->quota().held(), 0);
  absl::StatusOr<RoundOutcome> out = hub_->Close(nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ(out->mean[0], 1.0f);
}

}  // namespace
}  // namespace sextant
