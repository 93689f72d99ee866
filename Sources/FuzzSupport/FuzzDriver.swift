#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A libFuzzer entry point: one input, return 0.
public typealias FuzzEntry = @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt

#if FUZZING
// SwiftPM links every executable on Linux with `--defsym main=<Target>_main` (so tests can link
// executables), and libFuzzer's own `main` is then never used: each target's `<Target>_main`
// hands control to libFuzzer's driver with the same arguments through `runFuzzer`.
@_extern(c, "LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ testOneInput: FuzzEntry) -> CInt

/// Runs libFuzzer's driver over `entry` with the process's arguments.
public func runFuzzer(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ entry: FuzzEntry) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments, entry)
}
#endif

/// Without libFuzzer: replays the files given as arguments (directories: every file in them) through
/// a target's entry point, as `FuzzTemplate fuzz/regressions/template`. A crash stops the replay
/// on the input that caused it.
public enum FuzzReplay {
    public static func run(_ name: String, _ entry: FuzzEntry) {
        // An input that makes the code under test allocate without bound must fail here, fast,
        // as it does under libFuzzer's -rss_limit_mb, rather than exhaust the machine's memory.
        #if canImport(Glibc)
        var limit = rlimit(rlim_cur: 4 << 30, rlim_max: 4 << 30)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit)
        #endif
        var count = 0
        for path in CommandLine.arguments.dropFirst() {
            for file in inputFiles(path) {
                guard let bytes = readFile(file) else {
                    print("\(name): cannot read \(file)")
                    exit(2)
                }
                bytes.withUnsafeBufferPointer { _ = entry($0.baseAddress, $0.count) }
                count += 1
            }
        }
        print("\(name): replayed \(count) input\(count == 1 ? "" : "s") without a failure")
    }

    /// `path` itself, or the regular files directly in it when it is a directory, sorted.
    static func inputFiles(_ path: String) -> [String] {
        guard let directory = opendir(path) else { return [path] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if !name.hasPrefix(".") { names.append(path + "/" + name) }
        }
        return names.sorted()
    }

    static func readFile(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return bytes
    }
}

/// Ends the process on a broken promise of the code under test, saying which target found it:
/// libFuzzer keeps the input that caused it.
public func fuzzAbort(_ target: String, _ message: String) -> Never {
    let line = Array("\(target): \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    abort()
}
