"""python -m groundwire_retriever: serve collections, ingest and search over gRPC."""

import os

from groundwire_core.grpc.server import run
from groundwire_retriever.private_files import UMASK
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings


def main() -> None:
    os.umask(UMASK)  # the data path's files, written from now on, are private
    settings = RetrieverSettings()
    run(RetrieverService(settings), settings)


if __name__ == "__main__":
    main()
