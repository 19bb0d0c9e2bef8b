import Foundation
import NetplayTestSupport
import Synchronization



/// Runs a command that leaves a daemon behind (`make up-detached`): spawned with
/// posix_spawn and only stdin/stdout/stderr inherited, output to a file, status from waitpid.
/// (Foundation's Process learns of an exit from a socket the child inherits; a daemon that
/// inherits it too would keep it open, and the Process would never finish.)
func runLeavingDaemon(_ executable: String, _ arguments: [String], environment: [String: String], timeout: Double) -> (status: Int32?, output: String) {
    let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-spawn-\(UUID().uuidString).out").path
    defer { unlink(outputPath) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { for pointer in argv + envp { free(pointer) } }
    var pid: pid_t = 0
    guard posix_spawn(&pid, executable, &actions, nil, argv, envp) == 0 else { return (nil, "posix_spawn failed") }
    let deadline = Date().addingTimeInterval(timeout)
    var status: Int32 = 0
    var exited = false
    while Date() < deadline {
        if waitpid(pid, &status, WNOHANG) == pid { exited = true; break }
        usleep(20_000)
    }
    if !exited { kill(pid, SIGKILL); waitpid(pid, &status, 0) }
    let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    return (exited ? (status >> 8) & 0xff : nil, output)
}
