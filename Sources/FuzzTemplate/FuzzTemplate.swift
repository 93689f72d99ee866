import FuzzSupport
import PushTemplates

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// libFuzzer target for the template engine (fuzz/README.md): the input, decoded as UTF-8 (invalid
// sequences become U+FFFD), is compiled in every position kind with a strict scope (the names a
// real account has, so the error and suggestion paths run) and a permissive one (every name exists,
// so most inputs compile), and every template that compiles is rendered with several value sets
// and every kind of secret masking. Nothing may crash or hang, and a few documented promises of
// the engine are checked (a violation traps, so libFuzzer keeps the input).

let kinds: [TemplateKind] = [.url, .body(.form), .body(.json), .body(.xml), .body(.raw), .headerValue, .plain]

/// Value sets every slot draws from (slot i takes entry i modulo the count): plain seed values,
/// then values with every kind of character an encoding must handle.
let valueSets: [[String]] = [
    ["johndow", "12345678", "12869E0E6E553673C54F29105A0647204C416A2A:7C3A0D14",
     "Udl99X2JFP1bWwS5gR/wGeLE1hmAB2CMpr1Ej0wxkrY=", "com.cloudsoftphone.app"],
    ["", "a b+c/d?e#f&g=h;i:j@k%l", "\"q\" \\ </x> &amp; 'a'", "line\r\nbreak\u{0}nul",
     "\u{1}\u{8}\u{B}\u{1F}\u{7F}", "é漢字😀\u{FEFF}\u{FFFE}\u{FFFF}", "%account[x]% %% %sha1(a)%",
     String(repeating: "xyz/", count: 40)],
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTemplateInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: size > 0 ? data : nil, count: size), as: UTF8.self)
    for kind in kinds {
        var strict = StrictScope()
        check(Template.compile(text, kind: kind, scope: &strict), text: text, kind: kind, slots: strict.slotCount)
        var permissive = PermissiveScope()
        check(Template.compile(text, kind: kind, scope: &permissive), text: text, kind: kind, slots: permissive.slotCount)
    }
    return 0
}

func check(_ compilation: TemplateCompilation, text: String, kind: TemplateKind, slots: Int) {
    let length = text.utf8.count
    let hasError = compilation.issues.contains { $0.severity == .error }
    // "The compiled template; nil when issues holds an error."
    require((compilation.template == nil) == hasError, "template present \(compilation.template != nil) but hasError \(hasError)")
    for issue in compilation.issues {
        require(issue.offset >= 0 && issue.offset <= length && issue.length >= 1,
                "issue out of the source: offset \(issue.offset) length \(issue.length) in \(length) bytes: \(issue.message)")
    }
    guard let template = compilation.template else { return }
    for reference in template.references {
        require(reference.offset >= 0 && reference.length >= 1 && reference.offset + reference.length <= length,
                "reference out of the source: \(reference)")
        require(reference.slot >= 0 && reference.slot < slots, "reference to a slot never given: \(reference)")
    }
    let maskings: [SecretMasking] = [.reveal, .stars, .replace { slot in "<\(slot ?? -1)>" }]
    for (index, set) in valueSets.enumerated() {
        let values = FuzzValues(texts: set, secretEvery: index + 2)
        for masking in maskings {
            do {
                let rendered = try template.render(values, masking: masking)
                if kind == .headerValue {
                    require(!rendered.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 },
                            "a header value rendered with CR, LF or NUL")
                }
            } catch {
                require(!error.message.isEmpty, "a render error without a message")
            }
        }
    }
}

func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fuzzAbort("FuzzTemplate", "broken promise: \(message())") }
}

/// The names an account's templates can use (SPEC §3), and `%account[KEY]%` for any key.
struct StrictScope: TemplateScope {
    static let names = ["selector", "pushToken", "pushTokenIncomingCall", "pushTokenOther", "pushappid",
                        "pushappid_incoming_call", "pushappid_other", "installid", "hostname", "platform",
                        "version", "appId", "receiverToken"]
    var keys: [String] = []

    var slotCount: Int { Self.names.count + keys.count }

    mutating func slot(forVariable name: String) -> Int? { Self.names.firstIndex(of: name) }

    mutating func slot(forVariable name: String, key: String) -> Int? {
        guard name == "account" else { return nil }
        if let index = keys.firstIndex(of: key) { return Self.names.count + index }
        keys.append(key)
        return Self.names.count + keys.count - 1
    }

    var variableNames: [String] { Self.names }
    var keyedVariableNames: [String] { ["account"] }
}

/// Every name is a variable and every name takes a key, so compilation fails only on syntax and
/// position errors.
struct PermissiveScope: TemplateScope {
    var names: [String] = []

    var slotCount: Int { names.count }

    mutating func slot(forVariable name: String) -> Int? { slot(name) }
    mutating func slot(forVariable name: String, key: String) -> Int? { slot(name + "[" + key + "]") }

    var variableNames: [String] { names.filter { !$0.hasSuffix("]") } }
    var keyedVariableNames: [String] { names.filter { $0.hasSuffix("]") } }

    private mutating func slot(_ name: String) -> Int {
        if let index = names.firstIndex(of: name) { return index }
        names.append(name)
        return names.count - 1
    }
}

struct FuzzValues: TemplateValues {
    let texts: [String]
    let secretEvery: Int

    func value(at slot: Int) -> String { texts[slot % texts.count] }
    func isSecret(at slot: Int) -> Bool { slot % secretEvery == 1 }
}

#if FUZZING
@_cdecl("FuzzTemplate_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzTemplateInput(data, size) }
}
#else
@main
enum Replay {
    static func main() {
        FuzzReplay.run("FuzzTemplate") { data, size in fuzzTemplateInput(data, size) }
    }
}
#endif
