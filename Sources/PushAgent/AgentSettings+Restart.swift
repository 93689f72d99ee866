import PushConfig

extension AgentSettings {
    /// The `agent:` keys whose values differ in `new` and take effect only when the agent
    /// restarts (all but `reportInterval`, `timeout`, `metrics` and `removalGuard`, which a reload applies; `stateDirectory`
    /// is the agent's place, never changed while it runs).
    func waitingForRestart(_ new: AgentSettings) -> [String] {
        var names: [String] = []
        if new.concurrency != concurrency { names.append("agent.concurrency") }
        if new.perHostConcurrency != perHostConcurrency { names.append("agent.perHostConcurrency") }
        if new.retry != retry { names.append("agent.retry") }
        if new.tlsCAFile != tlsCAFile { names.append("agent.tls.caFile") }
        if new.state != state { names.append("agent.state") }
        if new.statePassword != statePassword { names.append("agent.statePassword") }
        if new.leaseTimeout != leaseTimeout { names.append("agent.leaseTimeout") }
        if new.listen != listen { names.append("agent.listen") }
        if new.trackingSpool != trackingSpool { names.append("agent.trackingSpool") }
        // A setting added later and not named above still says that something waits.
        var rest = new
        rest.reportInterval = reportInterval
        rest.timeout = timeout
        rest.metricsPerAccount = metricsPerAccount
        rest.removalGuard = removalGuard
        rest.stateDirectory = stateDirectory
        if names.isEmpty && rest != self { names.append("an agent setting") }
        return names
    }
}
