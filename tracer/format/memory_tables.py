"""The TRACER_* memory tables of docs/design/capture-memory-jobs.md as one definition, shared by
the writers (the capture, tracer/capture/nsys_schema.py; synthetic traces) and the reader
(tracer/readers/memory_reader.py), which needs only the columns. No imports: every traced process that
records memory loads it at exit."""

FLAG = "TRACER_MEMORY"  # META_DATA_EXPORT name, "1" when the tables were recorded
READ, WRITE = 1, 2  # TRACER_MEMORY_ACCESS.mode bits (3: both)
QUERY_EVENT, QUERY_STREAM = 1, 2  # TRACER_HOST_QUERIES.kind

MEMORY_TABLES: dict[str, str] = {
    "TRACER_OPS": "id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, nameId INTEGER, globalTid INTEGER, start INTEGER NOT NULL, "
    "end INTEGER NOT NULL, seqNr INTEGER, bwdSeqNr INTEGER, correlationId INTEGER, callsiteId INTEGER",
    "TRACER_EXTERNAL_CORRELATION": "correlationId INTEGER NOT NULL, externalId INTEGER NOT NULL",
    "TRACER_MEMORY_ACCESS": "opId INTEGER NOT NULL, address INTEGER NOT NULL, bytes INTEGER NOT NULL, mode INTEGER NOT NULL, "
    "exact INTEGER NOT NULL, allocationId INTEGER, labelId INTEGER",
    "TRACER_ALLOCATIONS": "id INTEGER PRIMARY KEY, deviceId INTEGER, address INTEGER NOT NULL, bytes INTEGER NOT NULL, "
    "streamId INTEGER, start INTEGER, end INTEGER, source INTEGER, labelId INTEGER",
    "TRACER_HOST_QUERIES": "correlationId INTEGER NOT NULL, kind INTEGER NOT NULL, recordCorrelationId INTEGER, "
    "streamId INTEGER, start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER",
    "TRACER_LAUNCH_UNKNOWN": "correlationId INTEGER NOT NULL, nameId INTEGER, reason TEXT",
    "TRACER_GRAPH_NODES": "nodeId INTEGER NOT NULL, correlationId INTEGER, originalNodeId INTEGER",
    "TRACER_GRAPH_LAUNCHES": "correlationId INTEGER NOT NULL, streamId INTEGER NOT NULL",
    "TRACER_GRAPH_EDGES": "fromNodeId INTEGER NOT NULL, toNodeId INTEGER NOT NULL",
    "TRACER_MEMORY_WINDOWS": "start INTEGER NOT NULL, end INTEGER NOT NULL",
}
WINDOW = "TRACER_MEMORY_WINDOW"  # META_DATA_EXPORT name: the capture window (--memory-steps, --memory-range); absent: whole run
