import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// The processors this process may run on, and how work on accounts is cut for them.
public enum Processors {
    /// The processors in this process's CPU affinity mask (as `taskset` or systemd's
    /// `CPUAffinity=` set it), else the online ones. A CPU quota (`CPUQuota=`) is not counted.
    public static let online: Int = {
        // A mask for 1,024 processors, glibc's cpu_set_t.
        var mask = [UInt64](repeating: 0, count: 16)
        let status = mask.withUnsafeMutableBytes { schedGetAffinity(0, $0.count, $0.baseAddress!) }
        let count = mask.reduce(0) { $0 + $1.nonzeroBitCount }
        return status == 0 && count > 0 ? count : max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }()

    /// Into how many runs work on `accounts` accounts is cut (reading them, checking them): none
    /// on one processor or for fewer than four runs' worth, else runs of at least `perRun`
    /// accounts, 16 per processor at most (accounts differ in cost, so equal halves would not
    /// end together). Smaller runs suit work nothing else runs beside.
    public static func runs(accounts: Int, perRun: Int = 1_000) -> Int {
        guard online > 1, accounts >= 4 * perRun else { return 1 }
        return max(1, min(online * 16, accounts / perRun))
    }

    /// `body` for each of `runs` consecutive ranges that together cover `0..<count`, on every
    /// processor (whichever thread is free takes the next run); the results in range order.
    public static func inRuns<Result: Sendable>(count: Int, runs: Int, _ body: @Sendable (Range<Int>) -> Result) -> [Result] {
        let size = (count + runs - 1) / runs
        return [Result](unsafeUninitializedCapacity: runs) { buffer, initialized in
            // Each run initializes only its own element.
            nonisolated(unsafe) let results = buffer
            DispatchQueue.concurrentPerform(iterations: runs) { run in
                Allocator.keyThisThreadsHeap()
                (results.baseAddress! + run).initialize(to: body(min(run * size, count)..<min((run + 1) * size, count)))
            }
            initialized = runs
        }
    }
}

/// glibc's `sched_getaffinity`, which Swift's Glibc module does not show (it needs `_GNU_SOURCE`).
@_silgen_name("sched_getaffinity")
private func schedGetAffinity(_ pid: pid_t, _ size: Int, _ mask: UnsafeMutableRawPointer) -> Int32
