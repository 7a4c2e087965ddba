package integration

// moreGuardCases: cases that need a pre-existing table or table features.
// C26 (names that need column mapping) is covered at the decoder and guard level only:
// the project's registry (Apicurio) validates Avro names and refuses its schemas.
func moreGuardCases() []guardCase {
	return []guardCase{
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
		c06Widened("C06A int to long on a table with type widening", map[string]string{"delta.enableTypeWidening": "true"}, ""),
		c06Widened("C06B2 int to long, type widening enabled by the pipeline as allowed", nil, "[typeWidening]"),
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

// c06Widened is case C06 where the evolve pipeline may widen count int → long: because the
// table already has type widening (props) or because the pipeline allows enabling it.
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
