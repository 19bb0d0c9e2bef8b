// Linux only (the RetroArch tunnel's epoll loop, the inbound guard's byte counts); empty elsewhere.
// accept4 and pipe2 need _GNU_SOURCE, which Swift's Glibc import does not define.
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include "CEpoll.h"

#ifdef __linux__

int cepoll_accept(int fd, struct sockaddr *address, socklen_t *length) {
    return accept4(fd, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int cepoll_pipe(int fds[2]) {
    return pipe2(fds, O_NONBLOCK | O_CLOEXEC);
}

long long cepoll_tcp_bytes_received(int fd) {
    struct tcp_info info;
    socklen_t length = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return -1;
    if (length < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) return -1;
    return (long long)info.tcpi_bytes_received;
}

long long cepoll_tcp_unread_bytes(int fd) {
    int unread = 0;
    if (ioctl(fd, SIOCINQ, &unread) != 0) return -1;
    return unread;
}
#endif /* __linux__ */
