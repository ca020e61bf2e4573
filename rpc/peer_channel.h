#ifndef SEXTANT_RPC_PEER_CHANNEL_H_
#define SEXTANT_RPC_PEER_CHANNEL_H_

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"

namespace sextant {

// A channel to a federated peer (a client's aggregator, an aggregator's upstream) that may go
// away and come back at the same address: a spot instance taken back and replaced. gRPC's
// default reconnect backoff grows from 1 s by 1.6 times a try (seconds, then minutes), so a
// replacement up after a second was found only several seconds later; this channel tries again
// every 100 ms at first and at least once a second.
std::shared_ptr<grpc::Channel> DialPeer(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials);

}  // namespace sextant

#endif  // SEXTANT_RPC_PEER_CHANNEL_H_
