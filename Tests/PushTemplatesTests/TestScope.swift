import PushTemplates

/// A scope with the Acrobits device values, a few globals, and `account[KEY]` for any key.
struct TestScope: TemplateScope {
    var names: [String] = ["selector", "pushToken", "pushTokenIncomingCall", "pushTokenOther", "pushappid",
                           "pushappid_incoming_call", "pushappid_other", "appId", "installid", "v"]
    var accountKeys: [String] = []

    mutating func slot(forVariable name: String) -> Int? {
        names.firstIndex(of: name)
    }

    mutating func slot(forVariable name: String, key: String) -> Int? {
        guard name == "account" else { return nil }
        if let index = accountKeys.firstIndex(of: key) { return 1000 + index }
        accountKeys.append(key)
        return 1000 + accountKeys.count - 1
    }

    var variableNames: [String] { names }
    var keyedVariableNames: [String] { ["account"] }
}

/// Values by name, resolved through a ``TestScope``.
struct TestValues: TemplateValues {
    var scope: TestScope
    var values: [String: String]
    var secrets: Set<String> = []

    func name(of slot: Int) -> String {
        slot >= 1000 ? "account[\(scope.accountKeys[slot - 1000])]" : scope.names[slot]
    }

    func value(at slot: Int) -> String { values[name(of: slot)] ?? "" }
    func isSecret(at slot: Int) -> Bool { secrets.contains(name(of: slot)) }
}

/// Compiles and renders in one step; fails the caller's expectation on any compile error.
func render(_ source: String, kind: TemplateKind = .plain, _ values: [String: String] = [:],
            secrets: Set<String> = [], masking: SecretMasking = .reveal) throws -> String {
    var scope = TestScope()
    let compiled = Template.compile(source, kind: kind, scope: &scope)
    guard let template = compiled.template else {
        throw CompileFailure(issues: compiled.issues)
    }
    return try template.render(TestValues(scope: scope, values: values, secrets: secrets), masking: masking)
}

func issues(_ source: String, kind: TemplateKind = .plain) -> [TemplateIssue] {
    var scope = TestScope()
    return Template.compile(source, kind: kind, scope: &scope).issues
}

struct CompileFailure: Error, CustomStringConvertible {
    var issues: [TemplateIssue]
    var description: String { issues.map { "\($0.offset): \($0.message)" }.joined(separator: "; ") }
}

/// The values of the Acrobits Push Token Reporter documentation examples.
let acrobitsValues: [String: String] = [
    "account[username]": "johndow",
    "account[password]": "12345678",
    "selector": "12869E0E6E553673C54F29105A0647204C416A2A:7C3A0D14",
    "pushTokenOther": "QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J",
    "pushToken": "QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J",
    "pushappid_other": "com.cloudsoftphone.app",
    "pushappid": "com.cloudsoftphone.app",
    "pushTokenIncomingCall": "Udl99X2JFP1bWwS5gR/wGeLE1hmAB2CMpr1Ej0wxkrY=",
    "pushappid_incoming_call": "com.cloudsoftphone.app.pushkit",
]
