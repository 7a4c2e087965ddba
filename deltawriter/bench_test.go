package deltawriter

const benchSchema = `{"type":"struct","fields":[
{"name":"id","type":"long","nullable":true,"metadata":{}},
{"name":"name","type":"string","nullable":true,"metadata":{}},
{"name":"price","type":"double","nullable":true,"metadata":{}},
{"name":"active","type":"boolean","nullable":true,"metadata":{}},
{"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
{"name":"note","type":"string","nullable":true,"metadata":{}},
{"name":"qty","type":"integer","nullable":true,"metadata":{}},
{"name":"amount","type":"decimal(12,2)","nullable":true,"metadata":{}},
{"name":"status","type":"string","nullable":true,"metadata":{}},
{"name":"country","type":"string","nullable":true,"metadata":{}}]}`
