import PushConfig
import Testing
import PushTestThreads

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Inputs kept in `fuzz/regressions/loader/` that once crashed the loader: each must now load
/// with a diagnostic. Each runs in a child process (an exit test) with a cap on its address space,
/// so a regression fails this test instead of taking the whole test run, or the machine's memory,
/// down with it.
@Suite("Fuzz regressions (fuzz/regressions/loader)", .blockingThreads)
struct FuzzRegressionTests {
    /// `fuzz/regressions/loader/oom_file-dev-zero`: `!file` naming a file that never ends. Reading
    /// it grew memory without bound until the process died; it must be an error on the tag's line.
    @Test("!file naming an endless device is an error, not an out-of-memory crash")
    func fileTagOnEndlessDevice() async {
        await #expect(processExitsWith: .success) {
            capAddressSpace(gigabytes: 2)
            let loaded = Loaded("""
                globals:
                  token: !file /dev/zero
                """)
            let found = loaded.diagnostics.all.contains {
                $0.severity == .error && $0.line == 2 && $0.message.contains("/dev/zero") && $0.message.contains("!file")
            }
            if !found {
                print("expected an error on line 2 naming /dev/zero and !file; got: \(loaded.lines)")
                exit(1)
            }
        }
    }
}

/// Makes an allocation beyond `gigabytes` of address space fail (and the process stop) at once.
private func capAddressSpace(gigabytes: UInt) {
    var limit = rlimit(rlim_cur: rlim_t(gigabytes << 30), rlim_max: rlim_t(gigabytes << 30))
    #if canImport(Glibc)
    _ = setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit)
    #else
    _ = setrlimit(RLIMIT_AS, &limit)
    #endif
}
