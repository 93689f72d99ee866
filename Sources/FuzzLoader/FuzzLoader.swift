import FuzzSupport
import PushAcrobits
import PushConfig
import PushTemplates

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// libFuzzer target for configuration loading (fuzz/README.md). Each input is
//  1. parsed by `YAMLParser.parse` directly, checking that every node position lies in the input;
//  2. written to `config.yaml` in a private scratch directory (beside a `templates/` folder, a
//     `!file` secret and a `!credential`, so those paths run too) and loaded by the full
//     `ConfigurationLoader`, after which `RequestBuilder.checkAll` compiles and renders every
//     request, as `pushreporter validate` does; a few accounts are also rendered in the other
//     secret displays. Every diagnostic placed in the input must point inside it.
// Nothing may crash or hang; a broken promise traps, so libFuzzer keeps the input.

/// The scratch directory under `$TMPDIR`, created once per process and removed at a normal exit
/// (`fuzz/run.sh` points `TMPDIR` into `.build-fuzz`, so those a crash leaves behind stay there).
let scratch: String = {
    let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
    var template = Array((base + "/pushreporter-fuzzloader-XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else { fatal("mkdtemp failed") }
    let path = String(cString: made)
    mkdir(path + "/templates", 0o700)
    mkdir(path + "/shared", 0o700)
    mkdir(path + "/credentials", 0o700)
    writeFile(path + "/templates/fuzz-json.yaml", Array("""
        pushTokenReporterPostData: '{"user": "%account[username]%", "token": "%pushTokenOther%", "n": %account[n]%}'
        pushTokenReporterContentType: application/json
        pushTokenReporterUrl: ${base}token/%account[username]%

        """.utf8))
    writeFile(path + "/shared/fuzz-form.yaml", Array("""
        pushTokenReporterMethod: POST
        pushTokenReporterContentType: application/x-www-form-urlencoded
        pushTokenReporterPostData: user=%account[username]%&sel=%selector%&sig=%sha256(%account[password]%)%
        pushTokenReporterCustomHeaders: "X-Token: %pushTokenIncomingCall%"

        """.utf8))
    writeFile(path + "/secret.txt", Array("file-secret\n".utf8))
    writeFile(path + "/credentials/token", Array("credential-secret\r\n".utf8))
    atexit(removeScratch)
    return path
}()

let configPath = scratch + "/config.yaml"

/// `FUZZ_VERBOSE=1` prints each input's diagnostics (for looking at a replayed input).
let verbose = getenv("FUZZ_VERBOSE") != nil

/// Registered with atexit: removes the scratch directory and the files this target put in it.
func removeScratch() {
    for file in ["/config.yaml", "/templates/fuzz-json.yaml", "/shared/fuzz-form.yaml", "/secret.txt", "/credentials/token"] {
        unlink(scratch + file)
    }
    for directory in ["/templates", "/shared", "/credentials", ""] { rmdir(scratch + directory) }
}

let environment = LoaderEnvironment(
    variables: ["JOHN_PASSWORD": "env-secret", "HOME": "/root", "CREDENTIALS_DIRECTORY": scratch + "/credentials"],
    templateSearchPath: [scratch + "/shared"],
    hostname: "fuzzhost")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLoaderInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: size > 0 ? data : nil, count: size))
    let source = SourceText(bytes: bytes)

    // 1. The parser alone.
    let parsed = YAMLParser.parse(bytes)
    for error in parsed.errors {
        requireInside(error.position, source, "YAML error '\(error.message)'")
    }
    if let root = parsed.root {
        // Aliases can make millions of nodes out of a few bytes (they share storage); walking
        // them all would only measure this loop, so a node budget bounds the walk.
        var budget = 20_000
        checkPositions(root, source, budget: &budget)
    }

    // 2. The whole loader and every request, as `validate` runs them.
    writeFile(configPath, bytes)
    let result = ConfigurationLoader(environment: environment).load(paths: [configPath])
    var diagnostics = result.diagnostics
    var builder = RequestBuilder(configuration: result.configuration, sources: result.sources,
                                 installID: nil, hostname: environment.hostname)
    builder.checkAll(into: &diagnostics)
    for account in result.configuration.accounts.prefix(4) where account.isEnabled {
        for reporter in Reporter.allCases {
            for display in [SecretDisplay.stars, .shellVariables] {
                var scratchDiagnostics = DiagnosticList()
                _ = builder.request(for: account, reporter: reporter, display: display, diagnostics: &scratchDiagnostics)
            }
        }
    }
    for diagnostic in diagnostics.all where diagnostic.file == configPath && diagnostic.line > 0 {
        requireInside(SourcePosition(line: diagnostic.line, column: diagnostic.column), source,
                      "diagnostic '\(diagnostic.formatted)'")
    }
    let lines = diagnostics.sorted(fileOrder: result.configuration.files).map(\.formatted)
    if verbose {
        print("\(result.configuration.accounts.count) accounts")
        for line in lines { print("  " + line.replacing(scratch + "/", with: "")) }
    }
    return 0
}

func checkPositions(_ node: YAMLNode, _ source: SourceText, budget: inout Int) {
    guard budget > 0 else { return }
    budget -= 1
    switch node {
    case .scalar(let scalar):
        requireInside(scalar.start, source, "scalar start")
        requireInside(scalar.end, source, "scalar end")
    case .mapping(let mapping):
        requireInside(mapping.start, source, "mapping start")
        for entry in mapping.entries {
            requireInside(entry.key.start, source, "key start")
            checkPositions(entry.value, source, budget: &budget)
        }
    case .sequence(let sequence):
        requireInside(sequence.start, source, "sequence start")
        for item in sequence.items { checkPositions(item, source, budget: &budget) }
    }
}

/// A position must name a character of the input, or the end of a line (SourceText's contract).
func requireInside(_ position: SourcePosition, _ source: SourceText, _ what: @autoclosure () -> String) {
    if source.byteOffset(of: position) == nil {
        fatal("broken promise: \(what()) at \(position.line):\(position.column) lies outside the input "
              + "(\(source.lineCount) lines, \(source.bytes.count) bytes)")
    }
}

func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { fatal("cannot write \(path)") }
    defer { close(fd) }
    var written = 0
    while written < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
        guard n > 0 else { fatal("cannot write \(path)") }
        written += n
    }
}

func fatal(_ message: String) -> Never {
    fuzzAbort("FuzzLoader", message)
}

#if FUZZING
@_cdecl("FuzzLoader_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzLoaderInput(data, size) }
}
#else
@main
enum Replay {
    static func main() {
        FuzzReplay.run("FuzzLoader") { data, size in fuzzLoaderInput(data, size) }
    }
}
#endif
