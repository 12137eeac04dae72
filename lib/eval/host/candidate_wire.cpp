#include "eval/host/candidate_wire.hpp"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <cerrno>

namespace ks::eval::host::wire {

std::string make_packet(std::uint32_t op, std::uint64_t token, std::string_view payload) {
  Writer w;
  w.u32(kMagic);
  w.u32(op);
  w.u64(token);
  w.s.append(payload);
  return std::move(w.s);
}

std::uint64_t fresh_token() {
  std::uint64_t t = 0;
  while (t == 0)
    if (::getrandom(&t, sizeof t, 0) != static_cast<ssize_t>(sizeof t)) t = 0;
  return t;
}

ssize_t receive(int sock, std::string& buf, std::vector<int>& fds) {
  buf.resize(kMaxPacket);
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.push_back(fd);
      }
    }
  if (n >= 0) buf.resize(static_cast<std::size_t>(n));
  if (n > 0 && (m.msg_flags & MSG_TRUNC)) {
    errno = EMSGSIZE;
    return -1;
  }
  return n;
}

bool send_with_fds(int sock, std::string_view packet, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(packet.data()), packet.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  if (!fds.empty()) {
    m.msg_control = control;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do n = ::sendmsg(sock, &m, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(packet.size());
}

ssize_t receive_within(int sock, int ms, std::string& buf, std::vector<int>& fds) {
  pollfd p{sock, POLLIN, 0};
  int r;
  do r = ::poll(&p, 1, ms);
  while (r < 0 && errno == EINTR);
  if (r <= 0) {
    errno = r == 0 ? ETIMEDOUT : errno;
    return -1;
  }
  return receive(sock, buf, fds);
}

}  // namespace ks::eval::host::wire
