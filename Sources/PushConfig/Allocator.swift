/// How glibc's allocator extends its heaps, set for the whole process.
public enum Allocator {
    /// Has glibc extend each heap 64 MB at a time from now on.
    ///
    /// A thread other than the main one allocates from a heap that glibc extends one page at a
    /// time, with an `mprotect` call per page: validating 100,000 accounts made 65,703 such calls
    /// (`strace -f -c`), about a tenth of its CPU time. A large top pad makes each new heap usable
    /// whole at once (51 calls). Pages are committed only when touched, so resident memory does
    /// not grow while memory is in use; but up to the pad of freed memory stays with the process
    /// instead of going back to the system, which suits loading, not the agent nor what
    /// `run --once` does once loaded (see ``useSmallSteps()``). Called first thing in the
    /// process: a heap made before keeps its page-at-a-time growth. Setting the pad also fixes
    /// at 128 KB the size from which a block is mapped on its own (returned to the system as
    /// soon as it is freed).
    public static func useLargeSteps() {
        _ = setAllocatorOption(topPad, 64 << 20)
    }

    /// Back to glibc's default pad (128 KB, mallopt(3)), so freed memory is returned.
    public static func useSmallSteps() {
        _ = setAllocatorOption(topPad, 128 << 10)
    }

    /// Returns the heap memory that is free to the system (glibc's `malloc_trim(0)`).
    public static func releaseFreedMemory() {
        _ = trimAllocator(0)
    }

    /// `M_TOP_PAD` of `<malloc.h>`.
    private static let topPad: Int32 = -2
}

/// glibc's `mallopt` (declared in `<malloc.h>`, which the Glibc module does not import).
@_silgen_name("mallopt")
private func setAllocatorOption(_ parameter: Int32, _ value: Int32) -> Int32

/// glibc's `malloc_trim` (from `<malloc.h>` too).
@_silgen_name("malloc_trim")
private func trimAllocator(_ padding: Int) -> Int32
