import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One value of an account, global or default, with where it was written.
public struct ConfigValue: Sendable {
    /// The value exactly as written (after a tag such as `!env` was resolved).
    public var text: String
    /// Where it was written.
    public var origin: ValueOrigin
    /// Whether the value is secret: tagged, or under a key naming a password, secret or API token.
    /// (Stored right after the origin, in the room its last field leaves: every account holds
    /// many values.)
    public var isSecret: Bool
    /// The rarely set `secretName` and `template`, in one reference: every account holds a dozen
    /// values, and two optional strings in each would make them 80 bytes instead of 56.
    private var provenance: Provenance?

    /// The tag's name when the value came from `!env NAME`, `!credential NAME` or `!file PATH`.
    public var secretName: String? {
        get { provenance?.secretName }
        set { provenance = Provenance.make(secretName: newValue, template: template) }
    }

    /// The `use:` template the value came from, when it came from one.
    public var template: String? {
        get { provenance?.template }
        set { provenance = Provenance.make(secretName: secretName, template: newValue) }
    }

    public init(text: String, isSecret: Bool = false, secretName: String? = nil, origin: ValueOrigin, template: String? = nil) {
        self.text = text
        self.isSecret = isSecret
        self.origin = origin
        self.provenance = Provenance.make(secretName: secretName, template: template)
    }

    /// Where a value came from besides its file, when it says more than the file.
    private final class Provenance: Sendable {
        let secretName: String?
        let template: String?

        private init(secretName: String?, template: String?) {
            self.secretName = secretName
            self.template = template
        }

        /// nil when there is nothing to keep.
        static func make(secretName: String?, template: String?) -> Provenance? {
            secretName == nil && template == nil ? nil : Provenance(secretName: secretName, template: template)
        }
    }
}

extension ConfigValue {
    /// The text as messages may show it: `********` for a secret.
    public var shown: String { isSecret ? "********" : text }

    /// The text as a request rendered for `display` shows it: a secret written under `key` as
    /// sent (when `maySendSecrets`), as stars, or as a shell-variable marker.
    public func displayed(_ display: SecretDisplay, key: String, maySendSecrets: Bool) -> String {
        guard isSecret else { return text }
        switch display {
        case .asSent: return maySendSecrets ? text : "********"
        case .stars: return "********"
        case .shellVariables:
            guard maySendSecrets else { return "********" }
            return AccountTemplates.secretMarker(secretName ?? ShellVariable.name(from: key))
        }
    }
}

/// Where a value was written: its file, and the span of the scalar that held it (to place
/// template problems inside it).
public struct ValueOrigin: Sendable {
    /// The file, without reference counting (see ``SourcePath``). First, so that the flag at the
    /// end leaves room for ``ConfigValue/isSecret`` (a value is 56 bytes).
    let path: SourcePath
    /// The file's path.
    public var file: String { path.string }
    /// Where the scalar starts.
    public var position: SourcePosition
    /// Where the scalar ends.
    public var end: SourcePosition
    /// Whether the value's text is the scalar's text as written (no tag resolved, no `${KEY}`
    /// filled in), so that an offset in it can be found in the file.
    public var isVerbatim: Bool

    /// An origin that is only a place: a value not written in the file as such (a default).
    public init(file: String, position: SourcePosition) {
        self.path = SourcePath(file)
        self.position = position
        self.end = position
        self.isVerbatim = false
    }

    public init(file: String, scalar: YAMLScalar, isVerbatim: Bool = true) {
        self.init(path: SourcePath(file), scalar: scalar, isVerbatim: isVerbatim)
    }

    init(path: SourcePath, scalar: YAMLScalar, isVerbatim: Bool = true) {
        self.path = path
        self.position = scalar.start
        self.end = scalar.end
        self.isVerbatim = isVerbatim
    }
}

/// A file's path, kept for the life of the process and referred to without reference counting.
///
/// Every loaded value records its file. As a String, the path was one object shared by every
/// value of the file, whose reference count each copy of a value changed, from every thread at
/// once; those atomic operations on one cache line showed in the time to load and check 100,000
/// accounts. Paths are few (the files of a configuration and its templates), so each distinct
/// one is kept once, and forever.
struct SourcePath: @unchecked Sendable, Hashable {
    /// A NUL-terminated copy that is never freed; the same path always has the same pointer.
    private let pointer: UnsafePointer<CChar>

    init(_ path: String) {
        pointer = Self.interned.withLock { interned in
            if let pointer = interned[path] { return pointer }
            let pointer = UnsafePointer(strdup(path)!)
            interned[path] = pointer
            return pointer
        }
    }

    var string: String { String(cString: pointer) }

    /// Every path seen, with its copy.
    private static let interned = Mutex<[String: UnsafePointer<CChar>]>([:])
}

/// An account after `defaults` and `use:` were applied: a flat set of Account parameters.
public struct Account: Sendable {
    /// Its identity for state: `id`, else `username`. Unique across all files.
    public var id: String
    /// False when the account says `enabled: false`.
    public var isEnabled: Bool
    /// Every key, including the device values (aliases filled both ways).
    public var values: AccountValueTable
    /// Per-account settings of the backends it opts in to (`services:`), by service name.
    public var services: [String: ServiceValues]
    /// The file that declares the account.
    public var file: String { path.string }
    /// The file, without reference counting (see ``SourcePath``).
    let path: SourcePath
    /// Where the account's mapping starts.
    public var position: SourcePosition
    /// Keys the account (or `defaults`) wrote whose value could not be read, such as an unset
    /// `!env`: that is reported where it is written, so a template naming the key is not
    /// reported again as naming a key the account lacks.
    public var unreadableKeys: Set<String>

    public init(id: String, isEnabled: Bool = true, values: AccountValueTable,
                services: [String: ServiceValues] = [:], file: String, position: SourcePosition,
                unreadableKeys: Set<String> = []) {
        self.init(id: id, isEnabled: isEnabled, values: values, services: services, path: SourcePath(file), position: position,
                  unreadableKeys: unreadableKeys)
    }

    init(id: String, isEnabled: Bool, values: AccountValueTable, services: [String: ServiceValues],
         path: SourcePath, position: SourcePosition, unreadableKeys: Set<String>) {
        self.id = id
        self.isEnabled = isEnabled
        self.values = values
        self.services = services
        self.path = path
        self.position = position
        self.unreadableKeys = unreadableKeys
    }

    public subscript(key: String) -> String? { values[key]?.text }

    /// The text `%account[KEY]%` renders for `key`: the value written, else for `id` the
    /// account's id (its username when it writes no `id:`, SPEC §2), else nil.
    public func text(of key: AccountValueTable.PreparedKey) -> String? {
        if let value = values[key] { return value.text }
        return key.isID ? id : nil
    }

    /// The account as a service whose settings are account keys sees it (SPEC §9.1's shared
    /// receivers): the service's settings act as defaults under the account's own keys, and its
    /// values under the service's name (`services: {NAME: {…}}`) go over both.
    public func withDefaults(_ settings: [String: ConfigValue], over service: ServiceValues?) -> Account {
        var merged = AccountValueTable(settings)
        for (key, value) in values { merged[key] = value }
        for (key, value) in service?.values ?? [:] { merged[key] = value }
        var account = self
        account.values = merged
        return account
    }

    /// In ``unreadableKeys``: a `use:` template of the account could not be read (said where it
    /// is named), so what the account would hold is not known: no further check says it lacks
    /// what the template may have given.
    public static let templateNotReadKey = "use"

    /// Whether a `use:` template of the account could not be read.
    public var missesATemplate: Bool { unreadableKeys.contains(Self.templateNotReadKey) }

    /// Whether the account (or `defaults`) gives `key`, under either name of an alias pair,
    /// even with a value that could not be read: that was reported where it is written, so
    /// nothing is reported again as missing.
    public func writes(_ key: String) -> Bool {
        writes(AccountValueTable.PreparedKey(key))
    }

    /// ``writes(_:)`` for a key whose digest is known. `id` is always given: without `id:` it
    /// is the username (``text(of:)``).
    public func writes(_ key: AccountValueTable.PreparedKey) -> Bool {
        if values.contains(key) || key.isID { return true }
        guard !unreadableKeys.isEmpty else { return false }
        let key = key.name
        if unreadableKeys.contains(key) { return true }
        return DeviceValues.aliases.contains { pair in
            (pair.0 == key && unreadableKeys.contains(pair.1)) || (pair.1 == key && unreadableKeys.contains(pair.0))
        }
    }
}

/// A backend entry under the top-level `services:` key, kept for its backend to interpret.
public struct ServiceDefinition: Sendable {
    public var name: String
    public var type: String
    /// The entry's other settings that are single values, as written (tags resolved).
    public var settings: [String: ConfigValue]
    /// The entry's settings that are mappings of single values, keys in file order.
    public var mappings: [String: [(key: String, value: ConfigValue)]]
    /// Where each setting's key is written (for a problem with the key itself).
    public var keyPositions: [String: SourcePosition]
    public var file: String
    /// Where the service's name is written.
    public var position: SourcePosition
    /// Where its `type:` value is written (for a type no backend takes).
    public var typePosition: SourcePosition?

    public init(name: String, type: String, settings: [String: ConfigValue], mappings: [String: [(key: String, value: ConfigValue)]] = [:],
                keyPositions: [String: SourcePosition] = [:], file: String, position: SourcePosition, typePosition: SourcePosition? = nil) {
        self.name = name
        self.type = type
        self.typePosition = typePosition
        self.settings = settings
        self.mappings = mappings
        self.keyPositions = keyPositions
        self.file = file
        self.position = position
    }
}

/// An account's values for one service it opts in to (`services: {NAME: {…}}`, SPEC §9.0).
public struct ServiceValues: Sendable {
    /// The values as written (tags resolved); backends read them as templates.
    public var values: [String: ConfigValue]
    /// Where each key is written.
    public var keyPositions: [String: SourcePosition]
    public var file: String
    /// Where the service's name is written under the account (or its `defaults`).
    public var position: SourcePosition

    public init(values: [String: ConfigValue], keyPositions: [String: SourcePosition] = [:], file: String, position: SourcePosition) {
        self.values = values
        self.keyPositions = keyPositions
        self.file = file
        self.position = position
    }
}

/// Everything the configuration files say, merged.
public struct Configuration: Sendable {
    public var agent = AgentSettings()
    /// `globals:` from every file; usable as `%name%`.
    public var globals: [String: ConfigValue] = [:]
    /// Globals written whose value could not be read, such as an unset `!env`: reported where
    /// they are written, and still names templates may use (not "unknown variables" too).
    public var unreadableGlobals: Set<String> = []
    /// Accounts in file order.
    public var accounts: [Account] = []
    /// The accounts checked while they loaded and left out of `accounts` (`validate`'s large
    /// loads, see ``ConfigurationLoader/leavesOutPassedAccounts``); none otherwise.
    public var accountsLeftOut = AccountsLeftOut()
    public var services: [String: ServiceDefinition] = [:]
    /// The files read, in load order.
    public var files: [String] = []
    /// Of those, the files that could not be read or parsed (said where): their accounts are
    /// not known, so counts of accounts leave them out.
    public var filesNotRead: [String] = []

    public init() {}

    /// The accounts, taken out: what is known of them stays in ``accountsLeftOut``, as when a
    /// load leaves them out (their number, and every key they have, which the wording of a key
    /// an account lacks reads).
    public mutating func takeAccounts() -> [Account] {
        accountsLeftOut.add(accounts)
        defer { accounts = [] }
        return accounts
    }
}

/// What is kept of the accounts a load checked as they were read, found without a problem,
/// and did not keep (``ConfigurationLoader/leavesOutPassedAccounts``): what `validate` still
/// needs of them once they are checked. Their ids are still taken (a duplicate is reported).
public struct AccountsLeftOut: Sendable {
    /// How many accounts were left out, and how many of them are enabled.
    public var count = 0
    public var enabled = 0
    /// Every key the accounts left out have, read or unreadable: a problem with another account
    /// is worded by whether some account has the key it names.
    public var keys: Set<String> = []
    /// The key names last added: the next accounts of a file nearly always share them.
    private var lastNames: AccountKeyNames?

    public init() {}

    /// Counts every account of `accounts` as left out, with their keys (an account whose keys
    /// are those of the one before, as a file's nearly always are, adds none).
    mutating func add(_ accounts: [Account]) {
        var last: Int?
        for index in accounts.indices {
            count += 1
            if accounts[index].isEnabled { enabled += 1 }
            if !accounts[index].unreadableKeys.isEmpty { keys.formUnion(accounts[index].unreadableKeys) }
            if let last, accounts[index].values.hasSameKeys(as: accounts[last].values) { continue }
            keys.formUnion(accounts[index].values.keys)
            last = index
        }
        lastNames = nil
    }

    /// Counts `account` as left out, with its keys.
    mutating func add(_ account: LeftOutAccount) {
        count += 1
        if account.isEnabled { enabled += 1 }
        keys.formUnion(account.unreadableKeys)
        guard account.keys !== lastNames else { return }
        keys.formUnion(account.keys.names)
        lastNames = account.keys
    }
}

/// An account left out of a load once checked (``AccountsLeftOut``), until it is admitted.
struct LeftOutAccount: Sendable {
    let id: String
    let path: SourcePath
    let position: SourcePosition
    let isEnabled: Bool
    let keys: AccountKeyNames
    let unreadableKeys: Set<String>
}

/// The key names of an account, one list shared by the accounts that have the same.
final class AccountKeyNames: Sendable {
    let names: [String]

    init(_ names: [String]) {
        self.names = names
    }
}

/// The device values of an account (SPEC §2): the names a device's push tokens and app ids go
/// by, usable as `%name%` in every template (a backend's per-account defaults use them:
/// `deviceToken: %pushTokenOther%`).
public enum DeviceValues {
    public static let names = ["selector", "pushToken", "pushTokenIncomingCall", "pushTokenOther",
                               "pushappid", "pushappid_incoming_call", "pushappid_other"]
    /// Alias pairs: giving either name fills both.
    public static let aliases: [(String, String)] = [("pushToken", "pushTokenOther"), ("pushappid", "pushappid_other")]
}

/// The account keys pushreporter itself acts on (SPEC §2), whatever the backends: the device
/// values, the account's identity, `enabled`, `use:` and `services:`. The loader checks near
/// misses against them, and `pushreporter schema` describes them.
public enum AccountKeys {
    public static let own = DeviceValues.names + ["id", "username", "password", "enabled", "use", "services"]
}
