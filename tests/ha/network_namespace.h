#ifndef DDP_TESTS_HA_NETWORK_NAMESPACE_H_
#define DDP_TESTS_HA_NETWORK_NAMESPACE_H_

// A network namespace made by a test, standing for another host: two veth
// links join it to this one,
//   clients link  host 10.77.N.1 <-> namespace 10.77.N.2  (its clients)
//   store link    host 10.78.N.1 <-> namespace 10.78.N.2  (its etcd traffic)
// so that Cut() can take the store link down (packets to and from etcd
// vanish: a silent partition made by the kernel) while its clients still
// reach it. Needs root and iproute2 (`ip`); Create says why it cannot.
//
// Thread-safety: not thread-safe; one owner thread drives it.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddp::testing {

class NetworkNamespace {
 public:
  // FAILED_PRECONDITION with the reason (not root, no `ip`, no netns support).
  static absl::StatusOr<std::unique_ptr<NetworkNamespace>> Create();
  ~NetworkNamespace();  // deletes the links and the namespace

  // What runs a command inside: {"/usr/sbin/ip", "netns", "exec", NAME}.
  std::vector<std::string> ExecPrefix() const;
  // The namespace's address on the clients link (bind and dial it there).
  std::string address() const;
  // This host's address on the store link (etcd listens there too).
  std::string host_store_address() const;
  // Takes the store link down (silent) / up again.
  absl::Status Cut();
  absl::Status Heal();

 private:
  explicit NetworkNamespace(int index);
  absl::Status SetStoreLink(const std::string& state);  // "up" or "down"

  const int index_;
  const std::string name_;
  // Names the veth links: dh{c,s}SUFFIX on this host, dn{c,s}SUFFIX inside.
  const std::string suffix_;
};

}  // namespace ddp::testing

#endif  // DDP_TESTS_HA_NETWORK_NAMESPACE_H_
