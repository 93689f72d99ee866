import FuzzSupport
import PushListener

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// libFuzzer target for the HTTP/1.1 request parser that faces the network in the agent's
// endpoint (SPEC §9.5, the Journeys webhook; fuzz/README.md). The input is fed to the parser
// whole, then again cut into pieces whose sizes come from its own bytes (as a client's segments
// would arrive), with the endpoint's limits. Nothing may crash or hang, and the parser's promises
// are checked (a violation traps, so libFuzzer keeps the input):
// - the same bytes give the same events and the same error however they are cut;
// - a request's body is never larger than the limit, and its head never larger either;
// - after an error the parser stays failed with that error;
// - a request's `Content-Length`, when it has one, is its body's length.

let maxHead = 16 << 10
let maxBody = 64 << 10

/// What one feeding made: the requests in order (method, target, body size), then an error if one.
struct Run: Equatable {
    var requests: [String] = []
    var error: HTTPParseError?
}

func feed(_ bytes: [UInt8], cuts: [Int]) -> Run {
    var parser = HTTPRequestParser(maxHeadBytes: maxHead, maxBodyBytes: maxBody)
    var run = Run()
    var offset = 0
    var index = 0
    while offset < bytes.count || index == 0 {
        let size = cuts.isEmpty ? bytes.count : max(1, cuts[index % cuts.count])
        index += 1
        let end = min(bytes.count, offset + size)
        parser.append(bytes[offset..<end])
        offset = end
        while true {
            let event: HTTPRequestParser.Event?
            do {
                event = try parser.next()
            } catch {
                run.error = error
                // Failed for good: the same error again.
                do {
                    _ = try parser.next()
                    require(false, "a failed parser parsed on")
                } catch let again {
                    require(again == error, "a failed parser changed its error: \(error) then \(again)")
                }
                return run
            }
            guard let event else { break }
            if case .request(let head, let body) = event {
                require(body.count <= maxBody, "a body of \(body.count) bytes passed the limit of \(maxBody)")
                if case .length(let length) = head.framing {
                    require(length == body.count, "Content-Length \(length) but a body of \(body.count)")
                }
                run.requests.append("\(head.method) \(head.target) \(body.count)")
            }
        }
        if offset >= bytes.count { break }
    }
    return run
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: size > 0 ? data : nil, count: size))
    let whole = feed(bytes, cuts: [])
    // Pieces from the input's own last bytes (1 to 16 bytes each), and byte by byte.
    let cuts = bytes.suffix(8).map { Int($0 % 16) + 1 }
    for pieces in [cuts, [1]] {
        let cut = feed(bytes, cuts: pieces)
        require(cut == whole, "cut into pieces \(pieces) it parsed \(cut), whole \(whole)")
    }
    return 0
}

func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    guard !condition else { return }
    fuzzAbort("FuzzHTTP", "broken promise: \(message())")
}

#if FUZZING
@_cdecl("FuzzHTTP_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzHTTPInput(data, size) }
}
#else
@main
enum Replay {
    static func main() {
        FuzzReplay.run("FuzzHTTP") { data, size in fuzzHTTPInput(data, size) }
    }
}
#endif
