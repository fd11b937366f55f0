"""ChatSpecReason in an LCEL chain: prompt | ChatSpecReason | StrOutputParser.

The chain is invoked on one question and batched over two more; ChatSpecReason goes wherever
a chat model goes.

Run::

    pip install -e '.[examples]'     # from the repo root: langchain, rich, the RAG embedder
    export SPECREASON_DRAFT_URL=http://127.0.0.1:8201/v1   # optional: without these two,
    export SPECREASON_BASE_URL=http://127.0.0.1:8202/v1    # the `cpu` pair is started
    python examples/chain.py
"""

from __future__ import annotations

import sys

from _servers import SHORT, servers
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate

from langchain_specreason import ChatSpecReason

prompt = ChatPromptTemplate.from_messages(
    [
        ("system", "You are a careful tutor. Be brief: one or two short steps, then the result."),
        ("user", "{question}"),
    ]
)

QUESTION = "A train travels 60 km per hour for 2 hours. How far does it go?"
BATCH = [
    "What is 15 plus 27?",
    "A box has 5 red and 4 blue balls. How many balls are in the box?",
]


def main() -> int:
    with servers() as srv:
        llm = ChatSpecReason(
            draft_url=srv.draft_url, base_url=srv.base_url, family=srv.family, **SHORT
        )
        chain = prompt | llm | StrOutputParser()

        answer = chain.invoke({"question": QUESTION})
        print(f"invoke\n  Q: {QUESTION}\n  A: {' '.join(answer.split())}\n")

        answers = chain.batch([{"question": q} for q in BATCH])
        print("batch")
        for question, text in zip(BATCH, answers, strict=True):
            print(f"  Q: {question}\n  A: {' '.join(text.split())}")
    return 0 if all(a.strip() for a in [answer, *answers]) else 1


if __name__ == "__main__":
    sys.exit(main())
