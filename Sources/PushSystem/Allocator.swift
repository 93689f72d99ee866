#if canImport(Glibc)
import Glibc
#endif

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

    /// Returns the heap memory that is free to the system: the keys of the threads' heaps
    /// (``keyThisThreadsHeap()``), then glibc's `malloc_trim(0)`.
    public static func releaseFreedMemory() {
        for key in heapKeys.change({ $0.takeAll() }) { free(key) }
        _ = trimAllocator(0)
    }

    /// Returns the free pages inside every heap to the system (glibc's `malloc_trim(0)`), and
    /// keeps the heap keys (``keyThisThreadsHeap()``) for a later ``releaseFreedMemory()``.
    ///
    /// For memory freed while what remains is still growing: once a configuration is loaded,
    /// the file's bytes and the parse are free but stay resident in the loading threads'
    /// heaps, under the plans made next (about 12 MB at 100,000 accounts, 1.5 ms). Freeing the
    /// keys there instead left the tops of those heaps with the process while the agent sent
    /// (docs/performance.md, sixth round).
    public static func returnFreePages() {
        _ = trimAllocator(0)
    }

    /// Keeps a block of the heap the calling thread allocates from, for
    /// ``releaseFreedMemory()`` to free; called by the threads that load and plan.
    ///
    /// glibc gives a thread other than the main one a heap of its own, and `malloc_trim` returns
    /// the free pages inside every heap but not the free memory at the top of such a heap: that
    /// goes back only when a block of 64 KB or more is freed into it. Small blocks freed from
    /// another thread (the accounts a loading thread made, the plans of a planning one) never
    /// do it, and the threads that load a reload end before their blocks are freed: after the
    /// first reload of 100,000 accounts the agent kept 13–15 MB more, in the tops of those
    /// heaps. Freeing a key is such a free. A thread keys its heap once until the keys are
    /// freed. A key is never written: it costs address space, and only the pages glibc had
    /// resident where it placed it.
    package static func keyThisThreadsHeap() {
        let thread = UInt(pthread_self())
        guard !heapKeys.read({ $0.hasKey(of: thread) }), let block = malloc(HeapKeys.size) else { return }
        for key in heapKeys.change({ $0.add(block, of: thread) }) { free(key) }
    }

    private static let heapKeys = ConditionLock(HeapKeys())

    /// `M_TOP_PAD` of `<malloc.h>`.
    private static let topPad: Int32 = -2
}

/// glibc's `mallopt` (declared in `<malloc.h>`, which the Glibc module does not import).
@_silgen_name("mallopt")
private func setAllocatorOption(_ parameter: Int32, _ value: Int32) -> Int32

/// glibc's `malloc_trim` (from `<malloc.h>` too).
@_silgen_name("malloc_trim")
private func trimAllocator(_ padding: Int) -> Int32

/// The keys ``Allocator/keyThisThreadsHeap()`` keeps: at most ``kept`` (a reload that fails
/// frees none), the oldest given back beyond that (freed early, a key trims its heap early, which
/// does no harm).
package struct HeapKeys {
    /// Above glibc's 64 KB at which a free trims its heap, below the 128 KB from which a block
    /// is mapped on its own instead (see ``Allocator/useLargeSteps()``).
    static let size = 96 << 10

    /// The keys, oldest first, each with the thread that made it.
    private var held: [(key: UnsafeMutableRawPointer, thread: UInt)] = []
    /// More than the threads that load and plan a configuration.
    let kept: Int

    package init(kept: Int = 256) {
        self.kept = kept
    }

    package var keys: [UnsafeMutableRawPointer] { held.map(\.key) }

    /// Whether `thread` has keyed its heap since the keys were last taken.
    package func hasKey(of thread: UInt) -> Bool {
        held.contains { $0.thread == thread }
    }

    /// Keeps `key`, made by `thread`; returns the keys to free: `key` itself when `thread` has
    /// one already, else those beyond ``kept``.
    package mutating func add(_ key: UnsafeMutableRawPointer, of thread: UInt) -> [UnsafeMutableRawPointer] {
        if hasKey(of: thread) { return [key] }
        held.append((key, thread))
        guard held.count > kept else { return [] }
        defer { held.removeFirst(held.count - kept) }
        return held.prefix(held.count - kept).map(\.key)
    }

    /// Every key, to free; none is kept.
    package mutating func takeAll() -> [UnsafeMutableRawPointer] {
        defer { held = [] }
        return keys
    }
}
