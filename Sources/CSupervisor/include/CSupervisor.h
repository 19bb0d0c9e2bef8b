// Process control for netplay-supervisor that Swift cannot do safely between fork and exec:
// spawning a child in its own process group that dies with its parent, and reaping it.
#ifndef CSUPERVISOR_H
#define CSUPERVISOR_H

#include <sys/types.h>

/// Spawns `path` with `argv`/`envp` (NULL-terminated) in a new process group (pgid = pid), with
/// stdin from /dev/null and stdout/stderr on `stdout_fd`/`stderr_fd`, in `workdir` (NULL: the
/// current one). On Linux the child gets PR_SET_PDEATHSIG(SIGKILL), so it dies if the thread
/// that spawned it (the supervisor's reactor thread) dies, even by SIGKILL. Signal mask and
/// dispositions are reset. Returns the pid, or -errno when fork or exec failed (the exec error
/// is reported synchronously through a close-on-exec pipe).
pid_t nps_spawn(const char *path, char *const argv[], char *const envp[],
                int stdout_fd, int stderr_fd, const char *workdir);

/// Creates a pipe whose both ends are close-on-exec; the read end is non-blocking.
/// Returns 0 or -errno.
int nps_pipe(int fds[2]);

/// Non-blocking waitpid: 1 and the raw status when `pid` changed state, 0 when still running,
/// -errno on error (ECHILD: not our child).
int nps_reap(pid_t pid, int *status);

/// Decoders for a waitpid status.
int nps_exited(int status);
int nps_exit_status(int status);
int nps_signaled(int status);
int nps_term_signal(int status);

/// Sends `sig` to the process group `pgid` (kill(-pgid, sig)). Returns 0 or -errno.
int nps_kill_group(pid_t pgid, int sig);


#endif
