import PushTestSupport
import Testing
import PushTestThreads

/// The `agent:` block takes plain values: a secret's tag there is refused where it is written.
@Suite(.blockingThreads) struct AgentBlockTests {
    @Test func aTagUnderAgentIsRefusedAtItsPlace() throws {
        let config = """
            agent:
              timeout: !env PUSH_TIMEOUT
              retry: {initial: !file initial.txt}
              stateDirectory: !credential state
            accounts:
              - id: alice
                pushTokenReporterUrl: https://push.example.com/r
            """
        let result = try ProcessRunner.pushreporter(config: config, ["validate"], environment: ["PUSH_TIMEOUT": "5s"])
        #expect(result.status == 78)
        let reason = "!env, !file and !credential mark the secrets of accounts, globals and services, and agent settings "
            + "are not secret; write the value itself"
        let errors = result.stderrLines.filter { $0.contains(": error: ") }.map { String($0.drop { $0 != ":" }) }
        let expected: [String] = [":2:17: error: agent.timeout cannot be tagged !env: " + reason,
                                  ":3:26: error: agent.retry.initial cannot be tagged !file: " + reason,
                                  ":4:31: error: agent.stateDirectory cannot be tagged !credential: " + reason]
        #expect(errors == expected, "\(result.stderr)")
    }
}
