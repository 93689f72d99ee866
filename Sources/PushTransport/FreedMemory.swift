/// Gives the heap's free memory back to the system (glibc's `malloc_trim`), so that what a burst
/// of work freed does not stay in the process's resident size. The transport calls it when it
/// lets its idle handles go, and the agent once every account is reported.
public func returnFreedMemoryToSystem() {
    _ = mallocTrim(0)
}

/// glibc's `malloc_trim`, declared in `<malloc.h>`, which the Glibc module does not import.
@_silgen_name("malloc_trim")
private func mallocTrim(_ padding: Int) -> Int32
