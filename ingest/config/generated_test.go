package config

import (
	"strings"
	"testing"

	"github.com/ingestd/ingestd/ingest/internal/configtest"
)

func TestGeneratedColumnsConfig(t *testing.T) {
	cfgs, err := Load(configtest.Write(t, configtest.GeneratedColumns))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfgs[0].GeneratedNames(); strings.Join(got, ",") != "event_date,y" {
		t.Errorf("generated columns in file order: %v", got)
	}
	for _, c := range []struct {
		name, old, new string
		want           []string
	}{
		{"unsupported function", `"YEAR(created_at)"`, `"regexp_like(created_at, 'x')"`, []string{"p.yaml:9: ", "table.generated_columns.y", "function regexp_like", "fix: use one of the supported expressions"}},
		{"syntax error", `"YEAR(created_at)"`, `"YEAR(created_at"`, []string{"p.yaml:9: ", "table.generated_columns.y", `expected "," or ")"`}},
		{"refers to a generated column", `"YEAR(created_at)"`, `"YEAR(event_date)"`, []string{"p.yaml:9: ", `refers to the generated column "event_date"`}},
		{"no column", `"YEAR(created_at)"`, `"'x'"`, []string{"p.yaml:9: ", "reads no column"}},
		{"named like a Kafka column", "    y: \"YEAR(created_at)\"\n", "    _KAFKA_offset: \"YEAR(created_at)\"\n  kafka_columns: [offset]\n",
			[]string{"p.yaml:9: ", `table.generated_columns._KAFKA_offset: the name is the Kafka column _kafka_offset (table.kafka_columns lists offset)`, "fix: rename the generated column"}},
		{"bad time zone", "  create: true\n", "  create: true\n  properties: {ingestd.generation.timeZone: Mars/Olympus}\n", []string{"p.yaml:7: ", `ingestd.generation.timeZone="Mars/Olympus"`, "fix: set an IANA zone name"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(configtest.Write(t, strings.Replace(configtest.GeneratedColumns, c.old, c.new, 1)))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not contain %q", err, w)
				}
			}
		})
	}
}
