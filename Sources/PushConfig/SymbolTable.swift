import PushTemplates

/// The template scope of a configuration: device values, globals, built-ins and `account[KEY]`.
///
/// Each distinct variable gets one slot, shared by every template of every account, so a template
/// compiled once renders for any account.
struct SymbolTable: TemplateScope {
    enum Source: Sendable {
        /// With its digest worked out once: every rendering of every account looks it up.
        case accountKey(AccountValueTable.PreparedKey)
        case global(String)
        case builtin(BuiltinVariable)
    }

    private(set) var sources: [Source] = []
    private var plainSlots: [String: Int] = [:]
    private var accountSlots: [String: Int] = [:]
    let variableNames: [String]
    var keyedVariableNames: [String] { ["account"] }

    init(globals: some Collection<String>) {
        variableNames = DeviceValues.names + BuiltinVariable.allCases.map(\.rawValue) + globals.sorted()
    }

    mutating func slot(forVariable name: String) -> Int? {
        if let slot = plainSlots[name] { return slot }
        let source: Source
        if let literal = DeviceValues.names.first(where: { $0 == name }) {
            // The literal, never reference counted: every account's rendering looks it up.
            source = .accountKey(AccountValueTable.PreparedKey(literal))
        } else if let builtin = BuiltinVariable(rawValue: name) {
            source = .builtin(builtin)
        } else if variableNames.contains(name) {
            source = .global(name)
        } else {
            return nil
        }
        sources.append(source)
        plainSlots[name] = sources.count - 1
        return sources.count - 1
    }

    mutating func slot(forVariable name: String, key: String) -> Int? {
        guard name == "account" else { return nil }
        if let slot = accountSlots[key] { return slot }
        sources.append(.accountKey(AccountValueTable.PreparedKey(LoadSession.accountOwnKeys.first { $0 == key } ?? key)))
        accountSlots[key] = sources.count - 1
        return sources.count - 1
    }
}

/// What the rendering of every account shares: the symbol table, globals and built-ins, behind
/// one reference. Each request makes an ``AccountValues``; with these copied into it, that
/// changed six reference counts shared by every thread instead of one.
final class RenderContext: Sendable {
    let table: SymbolTable
    let globals: [String: ConfigValue]
    let builtins: [BuiltinVariable: String]

    init(table: SymbolTable, globals: [String: ConfigValue], builtins: [BuiltinVariable: String]) {
        self.table = table
        self.globals = globals
        self.builtins = builtins
    }
}

/// One account's values as a template sees them (``AccountTemplates/values(for:)``).
public struct AccountValues: TemplateValues, Sendable {
    public let account: Account
    let context: RenderContext

    public func value(at slot: Int) -> String {
        switch context.table.sources[slot] {
        case .accountKey(let key): account.text(of: key) ?? ""
        case .global(let name): context.globals[name]?.text ?? ""
        case .builtin(let builtin): context.builtins[builtin] ?? ""
        }
    }

    public func isSecret(at slot: Int) -> Bool {
        switch context.table.sources[slot] {
        case .accountKey(let key): account.values[key]?.isSecret ?? false
        case .global(let name): context.globals[name]?.isSecret ?? false
        case .builtin: false
        }
    }

    /// The shell-variable name a preview uses for the secret in `slot`.
    public func secretName(at slot: Int) -> String {
        switch context.table.sources[slot] {
        case .accountKey(let key):
            return account.values[key]?.secretName ?? ShellVariable.name(from: key.name)
        case .global(let name):
            return context.globals[name]?.secretName ?? ShellVariable.name(from: name)
        case .builtin(let builtin):
            return builtin.rawValue.uppercased()
        }
    }
}
