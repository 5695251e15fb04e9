"""The state the recorded calls build: the state model's replay (contexts current per thread, handles and
allocations with their owners and lives, failing calls), the facts it rests on, the ordering model (what
happens before what across streams, events, the host and memory), and the causes a finding draws on."""
