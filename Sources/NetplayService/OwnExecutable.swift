import Foundation

/// Where the running executable lives, whatever the command line called it. `argv[0]` is only
/// the name the caller used: run from PATH it is a bare `netplay-peer`, which resolved against
/// the working directory names a file that is not there.
public enum OwnExecutable {
    /// The running executable's file: the kernel's `/proc/self/exe`, else `argv[0]` with its
    /// links resolved.
    public static var url: URL {
        #if os(Linux)
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"), path.hasPrefix("/") {
            return URL(fileURLWithPath: path)
        }
        #endif
        return URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    }

    /// The directory holding it: where the other netplay executables are built or installed.
    public static var directory: URL { url.deletingLastPathComponent() }
}
