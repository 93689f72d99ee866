import Dispatch
import PushTemplates
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// The `agent:` block (SPEC §2): agent-wide settings, each set by one file only.
extension LoadSession {
    mutating func claimAgentKey(_ name: String, file: String, at position: SourcePosition) -> Bool {
        if let owner = agentKeyOwners[name] {
            diagnostics.error("agent.\(name) is already set at \(owner.file):\(owner.position.line); only one file may set it",
                              file: file, at: position)
            return false
        }
        agentKeyOwners[name] = (file, position)
        return true
    }

    mutating func loadAgent(_ node: YAMLNode, file: String) {
        guard let mapping = mapping(node, file: file, what: "agent") else { return }
        for pair in mapping.entries {
            let (key, value) = (pair.key, pair.value)
            guard let agentKey = AgentKey(rawValue: key.value) else {
                diagnostics.error(unknownKey(key.value, among: AgentKey.allCases.map(\.rawValue), context: "under agent"),
                                  file: file, at: key.start)
                continue
            }
            guard claimAgentKey(key.value, file: file, at: key.start) else { continue }
            switch agentKey {
            case .stateDirectory:
                if let text = scalarText(value, file: file, what: "agent.stateDirectory") {
                    configuration.agent.stateDirectory = text
                }
            case .timeout:
                if let d = duration(value, file: file, what: "agent.timeout", allowOff: false) { configuration.agent.timeout = d! }
            case .concurrency:
                if let n = positiveInt(value, file: file, what: "agent.concurrency") { configuration.agent.concurrency = n }
            case .perHostConcurrency:
                if let n = positiveInt(value, file: file, what: "agent.perHostConcurrency") { configuration.agent.perHostConcurrency = n }
            case .reportInterval:
                if let d = duration(value, file: file, what: "agent.reportInterval", allowOff: true) { configuration.agent.reportInterval = d }
            case .retry: loadRetry(value, file: file)
            case .state:
                guard let text = scalarText(value, file: file, what: "agent.state") else { continue }
                if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
                    if Self.uriHasPassword(text) {
                        diagnostics.error("agent.state must not hold a password: give it as agent.statePassword (!credential NAME), PGPASSWORD or ~/.pgpass",
                                          file: file, at: value.start)
                    } else {
                        configuration.agent.state = text
                    }
                } else {
                    diagnostics.error("agent.state must be a postgres:// URI (for a state directory, use agent.stateDirectory), not '\(text)'",
                                      file: file, at: value.start)
                }
            case .statePassword:
                // The one agent setting that is a secret: the PostgreSQL password, from a tag.
                guard case .scalar(let scalar) = value, scalar.tag != nil else {
                    diagnostics.error("agent.statePassword must be given as !credential NAME, !file PATH or !env NAME, never written in the file",
                                      file: file, at: value.start)
                    continue
                }
                // A tag that cannot be resolved has said why.
                guard let password = resolve(scalar, key: "statePassword", isSecret: true, file: file, account: nil) else { continue }
                configuration.agent.statePassword = password.text
            case .leaseTimeout:
                if let d = duration(value, file: file, what: "agent.leaseTimeout", allowOff: false) {
                    if d! < .seconds(3) {
                        diagnostics.error("agent.leaseTimeout must be at least 3s", file: file, at: value.start)
                    } else {
                        configuration.agent.leaseTimeout = d!
                    }
                }
            case .listen:
                guard let text = scalarText(value, file: file, what: "agent.listen") else { continue }
                if let address = ListenAddress(text) {
                    configuration.agent.listen = address
                } else {
                    diagnostics.error("agent.listen must be HOST:PORT with a numeric address or localhost (127.0.0.1:9180, [::1]:9180), not '\(text)'",
                                      file: file, at: value.start)
                }
            case .trackingSpool:
                guard let text = scalarText(value, file: file, what: "agent.trackingSpool") else { continue }
                guard !text.isEmpty else {
                    diagnostics.error("agent.trackingSpool must name a directory", file: file, at: value.start)
                    continue
                }
                // Relative to the file that names it, as agent.tls.caFile is.
                configuration.agent.trackingSpool = text.hasPrefix("/") ? text : FileSystem.join(FileSystem.directory(of: file), text)
            case .removalGuard:
                loadRemovalGuard(value, file: file)
            case .metrics:
                guard let metrics = self.mapping(value, file: file, what: "agent.metrics") else { continue }
                for pair in metrics.entries {
                    guard pair.key.value == "perAccount" else {
                        diagnostics.error(unknownKey(pair.key.value, among: ["perAccount"], context: "under agent.metrics"),
                                          file: file, at: pair.key.start)
                        continue
                    }
                    guard let text = scalarText(pair.value, file: file, what: "agent.metrics.perAccount") else { continue }
                    switch text {
                    case "true": configuration.agent.metricsPerAccount = true
                    case "false": configuration.agent.metricsPerAccount = false
                    default:
                        diagnostics.error("agent.metrics.perAccount must be true or false, not '\(text)'", file: file, at: pair.value.start)
                    }
                }
            case .tls:
                guard let tls = self.mapping(value, file: file, what: "agent.tls") else { continue }
                for pair in tls.entries {
                    let (tlsKey, tlsValue) = (pair.key, pair.value)
                    if tlsKey.value == "caFile" {
                        if let text = scalarText(tlsValue, file: file, what: "agent.tls.caFile") {
                            let path = text.hasPrefix("/") ? text : FileSystem.join(FileSystem.directory(of: file), text)
                            configuration.agent.tlsCAFile = path
                            switch FileSystem.read(path, limit: FileSystem.maximumSecretSize * 16) {
                            case .failure(let problem):
                                diagnostics.error("agent.tls.caFile: cannot read \(path): \(problem.message)", file: file, at: tlsValue.start)
                            case .success(let bytes) where !Self.holdsPEMCertificate(bytes):
                                // libcurl would refuse it only when the first https request is made.
                                diagnostics.error("agent.tls.caFile: \(path) holds no PEM certificate (a CA bundle is -----BEGIN CERTIFICATE----- blocks)",
                                                  file: file, at: tlsValue.start)
                            case .success:
                                break
                            }
                        }
                    } else {
                        diagnostics.error(unknownKey(tlsKey.value, among: ["caFile"], context: "under agent.tls"), file: file, at: tlsKey.start)
                    }
                }
            }
        }
    }

    /// `removalGuard: off`, or `{count: 100, share: 10%}` (either may be left out).
    mutating func loadRemovalGuard(_ node: YAMLNode, file: String) {
        if case .scalar(let scalar) = node {
            if scalar.value == "off" {
                configuration.agent.removalGuard = nil
            } else {
                diagnostics.error("agent.removalGuard must be off, or a mapping with count and share (count: 100, share: 10%), not '\(scalar.value)'",
                                  file: file, at: node.start)
            }
            return
        }
        guard let mapping = mapping(node, file: file, what: "agent.removalGuard") else { return }
        var guardSettings = RemovalGuard()
        for pair in mapping.entries {
            guard let text = scalarText(pair.value, file: file, what: "agent.removalGuard.\(pair.key.value)") else { continue }
            switch pair.key.value {
            case "count":
                if let count = Int(text), count >= 0 {
                    guardSettings.count = count
                } else {
                    diagnostics.error("agent.removalGuard.count must be a whole number of accounts, not '\(text)'", file: file, at: pair.value.start)
                }
            case "share":
                let number = text.hasSuffix("%") ? Double(text.dropLast().trimmingPrefix(while: { $0 == " " })) : nil
                if let number, number >= 0, number <= 100 {
                    guardSettings.share = number / 100
                } else {
                    diagnostics.error("agent.removalGuard.share must be a percentage from 0% to 100%, such as 10%, not '\(text)'",
                                      file: file, at: pair.value.start)
                }
            default:
                diagnostics.error(unknownKey(pair.key.value, among: ["count", "share"], context: "under agent.removalGuard"),
                                  file: file, at: pair.key.start)
            }
        }
        configuration.agent.removalGuard = guardSettings
    }

    mutating func loadRetry(_ node: YAMLNode, file: String) {
        guard let mapping = mapping(node, file: file, what: "agent.retry") else { return }
        let keys = ["initial", "multiplier", "max", "maxRetryAfter"]
        for pair in mapping.entries {
            let (key, value) = (pair.key, pair.value)
            let what = "agent.retry.\(key.value)"
            switch key.value {
            case "initial": if let d = duration(value, file: file, what: what, allowOff: false) { configuration.agent.retry.initial = d! }
            case "max": if let d = duration(value, file: file, what: what, allowOff: false) { configuration.agent.retry.max = d! }
            case "maxRetryAfter":
                if let d = duration(value, file: file, what: what, allowOff: false) { configuration.agent.retry.maxRetryAfter = d! }
            case "multiplier":
                guard let text = scalarText(value, file: file, what: what) else { continue }
                if let m = Double(text), m >= 1, m <= 100 {
                    configuration.agent.retry.multiplier = m
                } else {
                    diagnostics.error("\(what) must be a number from 1 to 100, not '\(text)'", file: file, at: value.start)
                }
            default:
                diagnostics.error(unknownKey(key.value, among: keys, context: "under agent.retry"), file: file, at: key.start)
            }
        }
        if configuration.agent.retry.initial > configuration.agent.retry.max {
            diagnostics.warning("agent.retry.initial is longer than agent.retry.max; every retry waits agent.retry.max",
                                file: file, at: mapping.start)
        }
    }
}
