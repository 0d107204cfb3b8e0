"""Every IRI of the provenance vocabulary, in one place.

Names follow docs/trace-model.md: ``TG_*`` for ``https://trustgraph.ai/ns/``, ``PROV_*``
for W3C PROV-O, plus ``RDF_TYPE``, ``RDFS_LABEL``, Dublin Core, SKOS and XSD datatypes.
Class IRIs whose name would clash with a predicate carry a ``_TYPE`` suffix
(``TG_DOCUMENT`` is the predicate ``tg:document``; ``TG_DOCUMENT_TYPE`` the class
``tg:Document``).  :data:`TG` gives the same IRIs by local name and fails fast on typos.
"""

from __future__ import annotations

from collections.abc import Iterator

PROV = "http://www.w3.org/ns/prov#"
TG_NS = "https://trustgraph.ai/ns/"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
XSD = "http://www.w3.org/2001/XMLSchema#"
DC = "http://purl.org/dc/elements/1.1/"
SKOS = "http://www.w3.org/2004/02/skos/core#"
SH = "http://www.w3.org/ns/shacl#"

# ---------------------------------------------------------------- RDF, RDFS, XSD
RDF_TYPE = RDF + "type"
RDF_REIFIES = RDF + "reifies"
RDFS_LABEL = RDFS + "label"
RDFS_COMMENT = RDFS + "comment"
XSD_STRING = XSD + "string"
XSD_INTEGER = XSD + "integer"
XSD_DOUBLE = XSD + "double"
XSD_DATETIME = XSD + "dateTime"
XSD_BOOLEAN = XSD + "boolean"

# ---------------------------------------------------------------- PROV-O
PROV_ENTITY = PROV + "Entity"
PROV_ACTIVITY = PROV + "Activity"
PROV_AGENT = PROV + "Agent"
PROV_WAS_DERIVED_FROM = PROV + "wasDerivedFrom"
PROV_WAS_GENERATED_BY = PROV + "wasGeneratedBy"
PROV_WAS_INFORMED_BY = PROV + "wasInformedBy"
PROV_WAS_ASSOCIATED_WITH = PROV + "wasAssociatedWith"
PROV_USED = PROV + "used"
PROV_STARTED_AT_TIME = PROV + "startedAtTime"
PROV_ENDED_AT_TIME = PROV + "endedAtTime"
PROV_GENERATED_AT_TIME = PROV + "generatedAtTime"

# ---------------------------------------------------------------- Dublin Core, SKOS
DC_TITLE = DC + "title"
DC_SOURCE = DC + "source"
DC_DATE = DC + "date"
DC_CREATOR = DC + "creator"
SKOS_DEFINITION = SKOS + "definition"

# ---------------------------------------------------------------- query-time classes
TG_QUESTION = TG_NS + "Question"
TG_GRAPH_RAG_QUESTION = TG_NS + "GraphRagQuestion"
TG_DOC_RAG_QUESTION = TG_NS + "DocRagQuestion"
TG_AGENT_QUESTION = TG_NS + "AgentQuestion"
TG_GROUNDING = TG_NS + "Grounding"
TG_EXPLORATION = TG_NS + "Exploration"
TG_FOCUS = TG_NS + "Focus"
TG_EDGE_SELECTION = TG_NS + "EdgeSelection"
TG_SYNTHESIS = TG_NS + "Synthesis"
TG_ANALYSIS = TG_NS + "Analysis"
TG_CONCLUSION = TG_NS + "Conclusion"
TG_ERROR = TG_NS + "Error"
TG_THOUGHT_TYPE = TG_NS + "Thought"
TG_OBSERVATION_TYPE = TG_NS + "Observation"
TG_REFLECTION_TYPE = TG_NS + "Reflection"
TG_ANSWER_TYPE = TG_NS + "Answer"
TG_PATTERN_DECISION = TG_NS + "PatternDecision"
TG_PLAN = TG_NS + "Plan"
TG_STEP_RESULT = TG_NS + "StepResult"
TG_DECOMPOSITION = TG_NS + "Decomposition"
TG_FINDING = TG_NS + "Finding"

# ---------------------------------------------------------------- query-time predicates
TG_QUERY = TG_NS + "query"
TG_OTEL_TRACE_ID = TG_NS + "otelTraceId"  # the OpenTelemetry trace of the query (docs/observability.md)
TG_CONCEPT = TG_NS + "concept"
TG_SCORE = TG_NS + "score"
TG_ENTITY = TG_NS + "entity"
TG_EDGE_COUNT = TG_NS + "edgeCount"
TG_SELECTED_EDGE = TG_NS + "selectedEdge"
TG_EDGE = TG_NS + "edge"
TG_REASONING = TG_NS + "reasoning"
TG_DROPPED_COUNT = TG_NS + "droppedCount"
TG_SENT_EDGE_COUNT = TG_NS + "sentEdgeCount"  # candidates shown to the edge selector (docs/trace-model.md)
TG_SELECTION_TOKEN_BUDGET = TG_NS + "selectionTokenBudget"
TG_SELECTION_PROMPT_TOKENS = TG_NS + "selectionPromptTokens"
TG_REASONING_UNUSABLE = TG_NS + "reasoningUnusable"  # why a selection's reasoning says nothing of its edge
TG_UNUSABLE_REASONING_COUNT = TG_NS + "unusableReasoningCount"
TG_CONTENT = TG_NS + "content"
TG_DOCUMENT = TG_NS + "document"
TG_CHUNK_COUNT = TG_NS + "chunkCount"
TG_SELECTED_CHUNK = TG_NS + "selectedChunk"
TG_THOUGHT = TG_NS + "thought"
TG_ACTION = TG_NS + "action"
TG_ARGUMENTS = TG_NS + "arguments"
TG_OBSERVATION = TG_NS + "observation"
TG_ANSWER = TG_NS + "answer"
TG_TERMINATION_REASON = TG_NS + "terminationReason"
TG_TOOL_ERROR = TG_NS + "toolError"
TG_PATTERN = TG_NS + "pattern"
TG_PLAN_STEP = TG_NS + "planStep"
TG_STEP_NUMBER = TG_NS + "stepNumber"
TG_SUBAGENT_GOAL = TG_NS + "subagentGoal"
TG_ERROR_MESSAGE = TG_NS + "errorMessage"
TG_STAGE = TG_NS + "stage"
TG_LLM_MODEL = TG_NS + "llmModel"
TG_EMBEDDING_MODEL = TG_NS + "embeddingModel"
TG_IN_TOKEN = TG_NS + "inToken"
TG_OUT_TOKEN = TG_NS + "outToken"

# ---------------------------------------------------------------- extraction classes
TG_DOCUMENT_TYPE = TG_NS + "Document"
TG_PAGE_TYPE = TG_NS + "Page"
TG_CHUNK_TYPE = TG_NS + "Chunk"
TG_SUBGRAPH_TYPE = TG_NS + "Subgraph"

# ---------------------------------------------------------------- extraction predicates
TG_CONTAINS = TG_NS + "contains"
TG_PAGE_COUNT = TG_NS + "pageCount"
TG_PAGE_NUMBER = TG_NS + "pageNumber"
TG_CHUNK_INDEX = TG_NS + "chunkIndex"
TG_CHAR_OFFSET = TG_NS + "charOffset"
TG_CHAR_LENGTH = TG_NS + "charLength"
TG_CHUNK_SIZE = TG_NS + "chunkSize"
TG_CHUNK_OVERLAP = TG_NS + "chunkOverlap"
TG_MIME_TYPE = TG_NS + "mimeType"
TG_COMPONENT_VERSION = TG_NS + "componentVersion"
TG_TRIPLE_COUNT = TG_NS + "tripleCount"

# ---------------------------------------------------------------- named graphs
GRAPH_DEFAULT = ""
GRAPH_SOURCE = "urn:graph:source"
GRAPH_RETRIEVAL = "urn:graph:retrieval"


class _Vocabulary:
    """Attribute access to ``tg:`` IRIs by local name (``TG.selectedEdge``); unknown names raise."""

    def __init__(self, base: str, names: set[str]):
        self._base = base
        self._names = frozenset(names)

    def __getattr__(self, name: str) -> str:
        if name.startswith("_") or name not in self._names:
            raise AttributeError(f"{name!r} is not a term of {self._base}")
        return self._base + name

    def __contains__(self, iri: str) -> bool:
        return iri.startswith(self._base) and iri[len(self._base):] in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._base + n for n in self._names))


TG = _Vocabulary(TG_NS, {
    value[len(TG_NS):] for key, value in dict(globals()).items()
    if key.startswith("TG_") and isinstance(value, str) and value.startswith(TG_NS) and key != "TG_NS"
})
