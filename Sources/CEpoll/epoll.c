// Linux only (the RetroArch tunnel's epoll loop); empty elsewhere.
// accept4 and pipe2 need _GNU_SOURCE, which Swift's Glibc import does not define.
#define _GNU_SOURCE
#include <fcntl.h>
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
#endif /* __linux__ */
