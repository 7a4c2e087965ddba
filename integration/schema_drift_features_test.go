package integration

// moreGuardCases: schema changes that need a pre-existing table or table features (see
// guardCase). Names that need column mapping ("order id", "a;b") are covered at the
// decoder and guard level only (TestCaseC26NamesNeedColumnMapping): the project's registry
// (Apicurio) validates Avro names and refuses such schemas.
func moreGuardCases() []guardCase {
	return []guardCase{
		// The NOT NULL columns of a table that exists (unlike one ingestd creates, C12) are
		// enforced per record: a null is never written into one, whatever the writer schema
		// says; evolve relaxes the column in the same commit instead.
		{
			name:  "C12strict NOT NULL columns of an existing table are enforced per record",
			table: `{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},{"name":"email","type":"string","nullable":false,"metadata":{}}]}`,
			schemas: map[string]string{
				"v1": rec("P", `{"name":"id","type":"long"}`, `{"name":"email","type":"string"}`),
				"v2": rec("P", `{"name":"id","type":"long"}`, `{"name":"email","type":["null","string"],"default":null}`),
			},
			events: [][2]string{
				{"v1", `{"id":1,"email":"a@example.com"}`},
				{"v2", `{"id":2,"email":"b@example.com"}`},
				{"v2", `{"id":3,"email":null}`},
				{"v2", `{"id":4,"email":"d@example.com"}`},
			},
			expect: map[string]caseExpect{
				// evolve relaxes email to nullable in the same commit and writes everything
				"evolve": {rows: []string{`{"email":"a@example.com","id":1}`, `{"email":"b@example.com","id":2}`, `{"email":null,"id":3}`, `{"email":"d@example.com","id":4}`},
					schema: "[[id int64 false] [email string true]]", halt: -1},
				// dead_letter writes the non-null v2 records and dead-letters the null one
				"dead_letter": {rows: []string{`{"email":"a@example.com","id":1}`, `{"email":"b@example.com","id":2}`, `{"email":"d@example.com","id":4}`},
					schema: "[[id int64 false] [email string false]]", dlq: map[int64]string{2: "not_null_violation email"}, halt: -1},
				// halt stops at the first null
				"halt": {rows: []string{`{"email":"a@example.com","id":1}`, `{"email":"b@example.com","id":2}`}, halt: 2},
			},
		},
		// int → long where widening is possible (delta-io/delta#3443, delta-io/delta#3626):
		// the table has type widening, or the pipeline may enable it.
		c06Widened("C06A int to long on a table with type widening", map[string]string{"delta.enableTypeWidening": "true"}, ""),
		c06Widened("C06B2 int to long, type widening enabled by the pipeline as allowed", nil, "[typeWidening]"),
		// A timestamp_ntz column needs the timestampNtz table feature, which writers had to
		// enable by hand or enabled silently (delta-io/delta#4103): evolve enables it only
		// when schema.allow_table_features lists it, and halts otherwise (C17b).
		{
			name: "C17 local-timestamp into timestamp_ntz only with the table feature allowed",
			schemas: map[string]string{
				"v1": rec("Trip", `{"name":"id","type":"long"}`),
				"v2": rec("Trip", `{"name":"id","type":"long"}`, `{"name":"pickup_local","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}],"default":null}`),
			},
			allow:  "[timestampNtz]",
			events: [][2]string{{"v1", `{"id":0}`}, {"v2", `{"id":1,"pickup_local":1704067200000000}`}},
			expect: map[string]caseExpect{
				"evolve": {rows: []string{`{"id":0,"pickup_local":null}`, `{"id":1,"pickup_local":1704067200000000}`},
					schema: "[[id int64 true] [pickup_local timestamp[us] true]]", halt: -1},
				"dead_letter": {rows: []string{`{"id":0}`}, dlq: map[int64]string{1: "schema_mismatch pickup_local"}, halt: -1},
				"halt":        {rows: []string{`{"id":0}`}, halt: 1},
			},
		},
		{
			name: "C17b local-timestamp without the table feature halts bronze",
			schemas: map[string]string{
				"v1": rec("Trip", `{"name":"id","type":"long"}`),
				"v2": rec("Trip", `{"name":"id","type":"long"}`, `{"name":"pickup_local","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}],"default":null}`),
			},
			events: [][2]string{{"v1", `{"id":0}`}, {"v2", `{"id":1,"pickup_local":1704067200000000}`}},
			expect: map[string]caseExpect{
				"evolve":      {rows: []string{`{"id":0}`}, halt: 1},
				"dead_letter": {rows: []string{`{"id":0}`}, dlq: map[int64]string{1: "schema_mismatch pickup_local"}, halt: -1},
				"halt":        {rows: []string{`{"id":0}`}, halt: 1},
			},
		},
		// A column typed from all-null values became a Null column Delta rejects
		// (delta-io/delta-rs#3891): note is added as string from the writer schema though
		// its first value is null, and legacy (Avro type null) is never written.
		{
			name: "C27 null-typed field ignored, all-null new column typed from the writer schema",
			schemas: map[string]string{
				"v1": rec("O", `{"name":"order_id","type":"long"}`),
				"v2": rec("O", `{"name":"order_id","type":"long"}`, `{"name":"note","type":["null","string"],"default":null}`, `{"name":"legacy","type":"null"}`),
			},
			events: [][2]string{{"v1", `{"order_id":1}`}, {"v2", `{"order_id":2,"note":null,"legacy":null}`}, {"v2", `{"order_id":3,"note":"gift","legacy":null}`}},
			expect: map[string]caseExpect{
				"evolve": {rows: []string{`{"note":null,"order_id":1}`, `{"note":null,"order_id":2}`, `{"note":"gift","order_id":3}`},
					schema: "[[order_id int64 true] [note string true]]", halt: -1},
				"dead_letter": {rows: []string{`{"order_id":1}`}, dlq: map[int64]string{1: "schema_mismatch note", 2: "schema_mismatch note"}, halt: -1},
				"halt":        {rows: []string{`{"order_id":1}`}, halt: 1},
			},
		},
	}
}

// c06Widened is int → long (v1 count int, v2 count long; 2147483647, then 2147483648 and
// 5) where the evolve pipeline may widen count: because the table already has type
// widening (props) or because the pipeline allows enabling it (allow). Evolve writes all
// three exactly; dead_letter dead-letters both v2 records; halt stops at offset 1.
func c06Widened(name string, props map[string]string, allow string) guardCase {
	v1 := `{"count":2147483647,"id":1}`
	return guardCase{
		name:  name,
		table: `{"type":"struct","fields":[{"name":"id","type":"integer","nullable":true,"metadata":{}},{"name":"count","type":"integer","nullable":true,"metadata":{}}]}`,
		props: props,
		allow: allow,
		schemas: map[string]string{
			"v1": rec("M", `{"name":"id","type":"int"}`, `{"name":"count","type":"int"}`),
			"v2": rec("M", `{"name":"id","type":"int"}`, `{"name":"count","type":"long"}`),
		},
		events: [][2]string{{"v1", `{"id":1,"count":2147483647}`}, {"v2", `{"id":2,"count":2147483648}`}, {"v2", `{"id":3,"count":5}`}},
		expect: map[string]caseExpect{
			"evolve": {rows: []string{v1, `{"count":2147483648,"id":2}`, `{"count":5,"id":3}`},
				schema: "[[id int32 true] [count int64 true]]", halt: -1},
			"dead_letter": {rows: []string{v1}, dlq: map[int64]string{1: "schema_mismatch count", 2: "schema_mismatch count"}, halt: -1},
			"halt":        {rows: []string{v1}, halt: 1},
		},
	}
}
