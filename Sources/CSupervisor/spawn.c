#define _GNU_SOURCE
#include "CSupervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#endif

int nps_pipe(int fds[2]) {
#ifdef __linux__
    if (pipe2(fds, O_CLOEXEC) != 0) return -errno;
#else
    if (pipe(fds) != 0) return -errno;
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
#endif
    int flags = fcntl(fds[0], F_GETFL);
    fcntl(fds[0], F_SETFL, flags | O_NONBLOCK);
    return 0;
}

pid_t nps_spawn(const char *path, char *const argv[], char *const envp[],
                int stdout_fd, int stderr_fd, const char *workdir) {
    int report[2];
    int rc = nps_pipe(report);
    if (rc != 0) return rc;
    // The report pipe's read end must block: we wait for exec (EOF) or an errno.
    fcntl(report[0], F_SETFL, fcntl(report[0], F_GETFL) & ~O_NONBLOCK);
    pid_t parent = getpid();

    pid_t pid = fork();
    if (pid < 0) {
        int saved = errno;
        close(report[0]);
        close(report[1]);
        return -saved;
    }
    if (pid == 0) {
        // Child: only async-signal-safe calls until exec.
        int err = 0;
        setpgid(0, 0);
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
#endif
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int s = 1; s < 32; s++) {
            if (s != SIGKILL && s != SIGSTOP) signal(s, SIG_DFL);
        }
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0 && devnull != 0) { dup2(devnull, 0); close(devnull); }
        if (stdout_fd >= 0 && stdout_fd != 1) dup2(stdout_fd, 1);
        if (stderr_fd >= 0 && stderr_fd != 2) dup2(stderr_fd, 2);
        // Nothing but 0, 1 and 2 reaches the program: descriptors the supervisor inherited
        // without close-on-exec (a wrapper's lock, a harness's pipe) were passed to every
        // service. Marked close-on-exec, not closed, so the report pipe works until exec.
#ifdef __linux__
        if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
            struct rlimit limit;
            int highest = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536 ? (int)limit.rlim_cur : 65536;
            for (int fd = 3; fd < highest; fd++) fcntl(fd, F_SETFD, FD_CLOEXEC);
        }
#endif
        if (workdir != NULL && chdir(workdir) != 0) {
            err = errno;
            (void)!write(report[1], &err, sizeof err);
            _exit(127);
        }
        execve(path, argv, envp);
        err = errno;
        (void)!write(report[1], &err, sizeof err);
        _exit(127);
    }
    // Parent: also set the group here, so it is in place whichever runs first.
    setpgid(pid, pid);
    close(report[1]);
    int child_errno = 0;
    ssize_t n;
    do {
        n = read(report[0], &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    close(report[0]);
    if (n == (ssize_t)sizeof child_errno) {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        return -child_errno;
    }
    return pid;
}

int nps_reap(pid_t pid, int *status) {
    pid_t r;
    do {
        r = waitpid(pid, status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r < 0) return -errno;
    return r == 0 ? 0 : 1;
}

int nps_exited(int status) { return WIFEXITED(status); }
int nps_exit_status(int status) { return WEXITSTATUS(status); }
int nps_signaled(int status) { return WIFSIGNALED(status); }
int nps_term_signal(int status) { return WTERMSIG(status); }

int nps_kill_group(pid_t pgid, int sig) {
    return kill(-pgid, sig) == 0 ? 0 : -errno;
}

