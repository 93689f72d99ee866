@testable import PushState
import Testing
import PushTestThreads

/// How a PostgreSQL URI is shown in messages: never with its password, in either place libpq reads one.
@Suite(.blockingThreads) struct PostgresURITests {
    @Test func aPasswordIsNeverShown() {
        #expect(PostgresConnection.withoutPassword("postgres://user:s3cret@db.example/app") == "postgres://user@db.example/app")
        #expect(PostgresConnection.withoutPassword("postgresql://u@h/db?sslmode=require&password=s3cret&connect_timeout=5")
                == "postgresql://u@h/db?sslmode=require&password=********&connect_timeout=5")
        #expect(PostgresConnection.withoutPassword("postgres://u:a@h/db?PASSWORD=b") == "postgres://u@h/db?password=********")
        #expect(PostgresConnection.withoutPassword("postgres://u@h/db") == "postgres://u@h/db")
    }
}
