"""Production traffic: OpenTelemetry trace exports imported as a run dir (`auditor traces`).

`otlp` reads an export as a stream of spans, `conventions` reads what each span says (OTel
GenAI, OpenInference, vLLM's server span), `assemble` joins a trace's spans into the answers
it gave, and `importer` writes the run dir with the window's population and its sample.
"""

from auditor.traces.importer import TraceImport, Window, draw_sample, import_traces, parse_moment

__all__ = ["TraceImport", "Window", "draw_sample", "import_traces", "parse_moment"]
