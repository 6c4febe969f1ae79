"""Write the quickstart notebook in both forms from one list of cells.

``python notebooks/build_notebooks.py`` writes

* ``notebooks/quickstart.ipynb`` (Jupyter, no outputs), and
* ``notebooks/quickstart.py`` (Databricks source format: import it into a
  Databricks workspace as a notebook).

Edit the cells here, never the generated files: ``tests/test_notebook.py``
checks that the committed files are what this script writes, and executes the
notebook end to end.
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CELLS = [
    (
        "markdown",
        """\
# sparklda quickstart

Topic models of the KOS blog corpus that ships with sparklda, trained with
`sparklda.LDA` inside a `pyspark.ml` Pipeline. Coming from
`pyspark.ml.clustering.LDA`, the only change is the import.

The notebook trains on 95% of the documents, shows the top words of each
topic, plots held-out quality against training time, scores the remaining
documents and saves the fitted pipeline. It runs in about a minute in Spark
local mode. On Databricks, install sparklda on the cluster (as a cluster
library, or `%pip install` its wheel) and the notebook uses the cluster's
session; it runs the same on classic (dedicated) compute and on Spark Connect
compute (standard access mode, serverless).""",
    ),
    (
        "code",
        """\
import os
import sys

from pyspark.sql import SparkSession

spark = SparkSession.getActiveSession()
if spark is None:  # not on Databricks: a small local session
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("sparklda-quickstart")
    if "SPARK_REMOTE" not in os.environ:  # else Spark Connect, e.g. SPARK_REMOTE=local[2]
        import sparklda  # its session properties: round results straight to the driver

        builder = builder.master("local[2]").config(map=sparklda.SESSION_PROPERTIES)
    spark = (builder.config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .getOrCreate())
connect = type(spark).__module__.startswith("pyspark.sql.connect")
if not connect:
    spark.sparkContext.setLogLevel("ERROR")  # Spark Connect (serverless) has no SparkContext
print("Spark", spark.version, "(Spark Connect)" if connect else "(classic)")""",
    ),
    (
        "markdown",
        """\
## The corpus

The UCI KOS corpus comes as bag-of-words counts. We expand it back into a
DataFrame of token lists, which is what a tokenizer gives you for raw text,
so that the Pipeline starts from words.""",
    ),
    (
        "code",
        """\
import gzip
from importlib.resources import files

import pandas as pd

kos = files("sparklda") / "data" / "kos"
vocab = (kos / "vocab.txt").read_text().splitlines()
with gzip.open(kos / "docword.txt.gz", "rt") as f:
    n_docs, n_terms, _ = (int(f.readline()) for _ in range(3))
    entries = pd.read_csv(f, sep=" ", names=["doc", "term", "count"])
docs = [(int(d), [vocab[t - 1] for t, c in zip(g["term"], g["count"]) for _ in range(c)])
        for d, g in entries.groupby("doc")]
# hash-partitioned by id and sorted: the split, the vocabulary's order and so the model
# are then the same whatever the session (classic or Spark Connect) made of the local data
words = (spark.createDataFrame(docs, "id long, words array<string>")
         .repartition(2, "id").sortWithinPartitions("id"))
train, new = words.randomSplit([0.95, 0.05], seed=1)
train.cache()
print(f"{n_docs} documents, {n_terms} terms: {train.count()} to train on, "
      f"{new.count()} new ones to score")""",
    ),
    (
        "markdown",
        """\
## Train: CountVectorizer, then LDA, in one Pipeline

`from sparklda import LDA` replaces `from pyspark.ml.clustering import LDA`;
the Params keep pyspark's names (`k`, `maxIter`, `seed`, `optimizer`, ...).
`maxIter` counts passes over the corpus. `heldoutFraction` keeps 10% of the
training documents out to measure held-out quality every `evalEvery`
rounds of `minibatchSize` documents.""",
    ),
    (
        "code",
        """\
from pyspark.ml import Pipeline
from pyspark.ml.feature import CountVectorizer

from sparklda import LDA  # was: from pyspark.ml.clustering import LDA
from sparklda.progress import Progress

lda = LDA(k=10, maxIter=2, seed=1, minibatchSize=1000, heldoutFraction=0.1, evalEvery=1)
lda.setCallbacks([Progress()])  # a progress bar while the corpus is built and trained
pipeline = Pipeline(stages=[CountVectorizer(inputCol="words", outputCol="features", minDF=2),
                            lda])
model = pipeline.fit(train)
cv_model, lda_model = model.stages
lda_model.setVocabulary(cv_model.vocabulary)  # name the terms for describeTopics
print(f"{lda_model.getK()} topics over {lda_model.vocabSize()} terms")""",
    ),
    ("markdown", "## Top words per topic"),
    (
        "code",
        """\
topics = lda_model.describeTopics(8).select("topic", "terms").toPandas()
topics["terms"] = topics["terms"].str.join(", ")
topics""",
    ),
    (
        "markdown",
        """\
## Held-out quality per round, and the top terms as charts

Each point scores the held-out documents by document completion (Foulds et
al. 2013, section 6): the topic mix is inferred from half of each
document's words and the other half is predicted. Higher is better. The
charts come from `sparklda.plots` (the `plots` extra: matplotlib), the same
convergence plot the train job writes with `[output] plots = true`.""",
    ),
    (
        "code",
        """\
from IPython.display import Image, display

from sparklda.plots import convergence_figure, png_bytes, topic_terms_figure

history = lda_model.trainingHistory()
display(Image(png_bytes(convergence_figure(history, "SCVB0, K=10, KOS"))))
display(Image(png_bytes(topic_terms_figure(lda_model.topicModel.describe_topics(8), 4, 8))))
pd.DataFrame(history)[["round", "passes", "elapsed_s", "heldout_loglik", "perplexity"]]""",
    ),
    (
        "markdown",
        """\
## Score new documents

`transform` adds `topicDistribution`, each document's topic proportions.
Documents with no known word get the uniform distribution (pyspark's LDA
gives zeros). `logPerplexity` is the held-out document-completion estimate
on these documents (lower is better); note that pyspark's is a variational
bound instead, so the two are not comparable.""",
    ),
    (
        "code",
        """\
import numpy as np

top_words = {r.topic: ", ".join(r.terms[:5]) for r in lda_model.describeTopics(5).collect()}
scored = model.transform(new).select("id", "topicDistribution")
rows = []
for r in scored.orderBy("id").limit(8).collect():
    theta = r.topicDistribution.toArray()
    k = int(np.argmax(theta))
    rows.append({"id": r.id, "top topic": k, "weight": round(float(theta[k]), 3),
                 "its words": top_words[k]})
print(f"log-perplexity of the new documents: "
      f"{lda_model.logPerplexity(cv_model.transform(new)):.3f}")
pd.DataFrame(rows)""",
    ),
    (
        "markdown",
        """\
## Explore the topics with pyLDAvis

With the `viz` extra installed (`pip install "sparklda[viz]"`), `toPyLDAvis`
computes pyLDAvis's inputs on Spark and pyLDAvis draws the topic map.""",
    ),
    (
        "code",
        """\
try:
    import pyLDAvis
except ImportError:
    pyLDAvis = None
    print('pyLDAvis is not installed: pip install "sparklda[viz]" to draw the topics')
if pyLDAvis is not None:
    inputs = lda_model.toPyLDAvis(cv_model.transform(train))
    vis = pyLDAvis.prepare(**inputs, sort_topics=False, n_jobs=1)
    print(f"pyLDAvis: {len(vis.topic_coordinates)} topics over {len(inputs['vocab'])} terms")
    html = pyLDAvis.prepared_data_to_html(vis)
    try:
        displayHTML(html)  # Databricks
    except NameError:
        from IPython.display import HTML, display
        display(HTML(html))""",
    ),
    (
        "markdown",
        """\
## Save and load the fitted pipeline

The pipeline saves like any other `pyspark.ml` pipeline (on Databricks use a
`dbfs:/` or cloud storage path).""",
    ),
    (
        "code",
        """\
from pyspark.ml import PipelineModel

path = "kos-lda-pipeline"
model.write().overwrite().save(path)
reloaded = PipelineModel.load(path)
# orderBy reads every row of the scoring tasks: a bare show() stops reading them after
# 3 rows, and PySpark's worker daemon then prints a BrokenPipeError on stderr
reloaded.transform(new).select("id", "topicDistribution").orderBy("id").show(3, truncate=60)""",
    ),
]

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def ipynb() -> str:
    cells = []
    for i, (kind, source) in enumerate(CELLS):
        cell = {
            "cell_type": kind,
            "id": f"cell-{i:02d}",
            "metadata": {},
            "source": source.splitlines(keepends=True),
        }
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        cells.append(cell)
    nb = {
        "cells": cells,
        "metadata": {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def databricks_source() -> str:
    parts = []
    for kind, source in CELLS:
        if kind == "markdown":
            lines = ["%md", *source.splitlines()]
            parts.append("\n".join(f"# MAGIC {line}".rstrip() for line in lines))
        else:
            parts.append(source)
    return "# Databricks notebook source\n" + "\n\n# COMMAND ----------\n\n".join(parts) + "\n"


def render() -> dict[str, str]:
    """File name -> content of every generated file."""
    return {"quickstart.ipynb": ipynb(), "quickstart.py": databricks_source()}


def main(argv=None) -> int:
    for name, text in render().items():
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote notebooks/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
