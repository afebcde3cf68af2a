"""The values the NCIP paper reports (ISSTA 2026), for setting this run's results beside them.

Each table is kept as the paper prints it (methods x the paper's dataset-model columns); a
subject of this project maps to a column by its dataset and model. A stand-in
(:data:`STAND_INS`) maps to the columns of the paper's dataset it stands for, with the caveat
the report prints beside it.
"""

from __future__ import annotations

COLUMNS = [
    ("mnist", "lenet1"),
    ("mnist", "lenet5"),
    ("fmnist", "lenet1"),
    ("fmnist", "lenet5"),
    ("cifar10", "resnet18"),
    ("cifar10", "vgg11"),
    ("cifar100", "resnet50"),
    ("cifar100", "densenet121"),
    ("tinyimagenet", "resnet152"),
    ("tinyimagenet", "densenet201"),
    ("imdb", "textcnn"),
    ("imdb", "transformer"),
    ("agnews", "textcnn"),
    ("agnews", "transformer"),
]

# Table 3: RAUC-ALL on clean data
_T3 = """
RS 0.513 0.575 0.547 0.515 0.528 0.519 0.560 0.561 0.650 0.635 0.554 0.574 0.507 0.541
LSA 0.900 0.851 0.845 0.774 0.787 0.771 0.864 0.860 0.865 0.839 0.720 0.607 0.804 0.700
DSA 0.979 0.982 0.885 0.893 0.943 0.907 0.891 0.887 0.893 0.878 0.755 0.728 0.838 0.830
Entropy 0.983 0.985 0.896 0.898 0.941 0.910 0.884 0.880 0.897 0.874 0.785 0.725 0.859 0.827
DeepGini 0.983 0.985 0.897 0.898 0.942 0.909 0.888 0.885 0.898 0.874 0.785 0.725 0.862 0.828
MSP 0.983 0.985 0.897 0.898 0.942 0.909 0.889 0.886 0.898 0.873 0.785 0.725 0.863 0.828
PCS 0.982 0.985 0.895 0.897 0.942 0.909 0.890 0.887 0.894 0.871 0.785 0.725 0.864 0.828
Dropout 0.785 0.941 0.581 0.848 0.855 0.720 0.487 0.510 0.578 0.693 0.690 0.705 0.702 0.830
EffiMAP 0.857 0.753 0.855 0.861 0.885 0.866 0.870 0.862 0.884 0.870 - - - -
NNS 0.981 0.984 0.899 0.910 0.943 0.909 0.893 0.892 0.896 0.879 0.785 0.724 0.867 0.829
TDPR 0.981 0.879 0.869 0.904 0.922 0.871 0.883 0.877 0.892 0.898 0.798 0.748 0.862 0.862
SETS 0.954 0.952 0.889 0.891 0.919 0.901 0.883 0.880 0.895 0.870 0.785 0.725 0.845 0.816
NCIP 0.986 0.986 0.904 0.931 0.952 0.908 0.902 0.904 0.908 0.906 0.814 0.844 0.879 0.898
"""
# Table 4: RAUC-500 on clean data
_T4 = """
RS 0.022 0.056 0.119 0.067 0.063 0.092 0.202 0.188 0.445 0.460 0.169 0.252 0.097 0.074
LSA 0.571 0.462 0.503 0.537 0.502 0.617 0.706 0.700 0.670 0.858 0.445 0.506 0.465 0.465
DSA 0.677 0.685 0.561 0.558 0.540 0.604 0.750 0.708 0.853 0.834 0.492 0.511 0.465 0.461
Entropy 0.707 0.718 0.566 0.563 0.530 0.622 0.765 0.774 0.886 0.903 0.496 0.522 0.445 0.482
DeepGini 0.706 0.720 0.564 0.561 0.541 0.630 0.781 0.793 0.888 0.896 0.496 0.522 0.468 0.489
MSP 0.705 0.720 0.572 0.557 0.545 0.626 0.789 0.801 0.901 0.883 0.496 0.522 0.481 0.487
PCS 0.700 0.720 0.542 0.548 0.541 0.606 0.758 0.735 0.905 0.820 0.496 0.522 0.486 0.484
Dropout 0.175 0.514 0.065 0.533 0.206 0.196 0.135 0.280 0.280 0.434 0.326 0.525 0.158 0.462
EffiMAP 0.394 0.163 0.460 0.472 0.432 0.528 0.695 0.685 0.860 0.846 - - - -
NNS 0.713 0.709 0.574 0.585 0.536 0.607 0.801 0.796 0.878 0.902 0.497 0.511 0.493 0.490
TDPR 0.722 0.677 0.409 0.655 0.461 0.600 0.745 0.798 0.916 0.886 0.519 0.550 0.432 0.623
SETS 0.497 0.444 0.477 0.454 0.367 0.503 0.612 0.628 0.819 0.787 0.473 0.523 0.355 0.353
NCIP 0.757 0.739 0.611 0.638 0.563 0.621 0.796 0.839 0.904 0.917 0.704 0.584 0.525 0.610
"""
# Table 6: adversarial data, RAUC-500 then RAUC-ALL, CIFAR10/CIFAR100/TinyImageNet columns only
_T6_COLUMNS = COLUMNS[4:10]
_T6 = """
RS 0.686 0.666 0.816 0.786 0.933 0.883 0.748 0.747 0.834 0.844 0.915 0.914
LSA 0.932 0.927 0.927 0.906 0.881 0.965 0.829 0.837 0.900 0.902 0.928 0.922
DSA 0.926 0.972 0.994 0.973 0.941 0.970 0.843 0.875 0.905 0.908 0.936 0.921
Entropy 0.944 0.932 0.969 0.974 0.985 0.974 0.836 0.874 0.904 0.907 0.939 0.912
DeepGini 0.942 0.931 0.969 0.979 0.986 0.977 0.836 0.873 0.904 0.907 0.938 0.912
MSP 0.936 0.927 0.973 0.985 0.988 0.976 0.836 0.874 0.904 0.907 0.937 0.911
PCS 0.945 0.974 0.970 0.973 0.877 0.924 0.835 0.872 0.903 0.905 0.935 0.911
Dropout 0.712 0.768 0.389 0.543 0.801 0.892 0.841 0.834 0.780 0.789 0.904 0.930
EffiMAP 0.879 0.755 0.957 0.955 0.972 0.956 0.852 0.858 0.898 0.908 0.937 0.936
NNS 0.887 0.892 0.949 0.956 0.960 0.963 0.822 0.801 0.887 0.889 0.928 0.905
TDPR 0.936 0.928 0.974 0.982 0.988 0.988 0.937 0.899 0.953 0.961 0.959 0.964
SETS 0.913 0.893 0.946 0.956 0.979 0.955 0.836 0.874 0.904 0.907 0.937 0.911
NCIP 0.944 0.939 0.965 0.963 0.973 0.988 0.926 0.899 0.939 0.945 0.954 0.958
"""
# Table 7: fault types at a 5% budget; image columns only (the first ten)
_T7 = """
TVD 51 42 43 41 56 66 234 260 366 400
TVD+NC 51 41 46 50 57 71 321 350 425 443
TVD+Margin 51 42 42 45 56 66 267 301 392 418
NCIP 52 41 48 50 57 68 346 374 446 445
"""
# Table 8: ablation RAUC-ALL (its last row is printed "NCIP (Full)"); the paper orders its
# columns MNIST, FMNIST, CIFAR10, CIFAR100,
# IMDB, AGNEWS, TinyImageNet (then an average, dropped here)
_T8_COLUMNS = COLUMNS[:8] + COLUMNS[10:14] + COLUMNS[8:10]
_T8 = """
TVD 0.983 0.985 0.891 0.901 0.944 0.907 0.875 0.882 0.784 0.715 0.864 0.892 0.884 0.884
TVD+NC 0.983 0.986 0.880 0.929 0.942 0.904 0.890 0.894 0.798 0.851 0.880 0.891 0.907 0.912
TVD+Margin 0.983 0.985 0.896 0.901 0.944 0.909 0.887 0.890 0.786 0.720 0.866 0.889 0.893 0.881
NCIP 0.986 0.987 0.904 0.931 0.952 0.908 0.902 0.904 0.814 0.844 0.879 0.898 0.908 0.906
"""
# Table 1: test accuracy of the models under test
ACCURACY = dict(
    zip(
        COLUMNS,
        [
            0.9887,
            0.9918,
            0.8917,
            0.9021,
            0.9554,
            0.8936,
            0.7793,
            0.7888,
            0.5484,
            0.5814,
            0.8030,
            0.7546,
            0.9154,
            0.9030,
        ],
        strict=True,
    )
)
DATASET_NAMES = {
    "mnist": "MNIST",
    "fmnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
    "tinyimagenet": "Tiny ImageNet",
    "imdb": "IMDB",
    "agnews": "AG News",
}
EPOCHS = {
    "mnist": 100,
    "fmnist": 200,
    "cifar10": 300,
    "cifar100": 500,
    "tinyimagenet": 500,
    "imdb": 100,
    "agnews": 100,
}
# Table 9 (seconds), the four LeNet subjects: SA, Uncert, Dropout, NNS, SETS, EffiMAP train,
# EffiMAP predict, TDPR train, TDPR predict, NCIP select, NCIP predict
COST_COLUMNS = [
    "SA",
    "Uncert",
    "Dropout",
    "NNS",
    "SETS",
    "EffiMAP-Train",
    "EffiMAP-Predict",
    "TDPR-Train",
    "TDPR-Predict",
    "NCIP-Select",
    "NCIP-Predict",
]
COST = {
    ("mnist", "lenet1"): [78.15, 5.46, 6.38, 8.92, 67.19, 220.31, 5.19, 70.70, 4.58, 1.96, 4.95],
    ("mnist", "lenet5"): [84.13, 5.13, 8.07, 7.86, 65.46, 231.23, 5.78, 1.88, 9.43, 2.03, 4.94],
    ("fmnist", "lenet1"): [75.34, 5.57, 7.55, 7.70, 69.23, 205.06, 6.32, 185.16, 4.88, 1.98, 4.73],
    ("fmnist", "lenet5"): [72.93, 5.70, 7.20, 8.82, 67.58, 217.71, 5.12, 156.13, 4.96, 2.07, 4.92],
}


def _method_names() -> dict[str, str]:
    """The paper's row name -> this project's method name, from the method registry."""
    from ncip.study.scores import list_methods, method_info

    return {method_info(m).paper: m for m in list_methods(None) if method_info(m).paper}


def ablation_rows() -> list[str]:
    """Table 8's row names in the paper's order (TVD, TVD+NC, TVD+Margin, NCIP)."""
    return [line.split()[0] for line in _T8.strip().splitlines()]


def row_order() -> list[str]:
    """The paper's row names in its order: Table 3's methods, then Table 8's ablation rows."""
    names = [line.split()[0] for t in (_T3, _T8) for line in t.strip().splitlines()]
    return list(dict.fromkeys(names))


def _parse(text: str, columns) -> dict:
    out: dict = {}
    methods = _method_names()
    for line in text.strip().splitlines():
        name, *vals = line.split()
        method = methods[name]
        for col, v in zip(columns, vals, strict=True):
            if v != "-":
                out.setdefault(method, {})[col] = float(v)
    return out


TABLE3 = _parse(_T3, COLUMNS)
TABLE4 = _parse(_T4, COLUMNS)
TABLE6_RAUC500 = _parse(
    "\n".join(" ".join(r.split()[:7]) for r in _T6.strip().splitlines()), _T6_COLUMNS
)
TABLE6_RAUCALL = _parse(
    "\n".join(" ".join([r.split()[0]] + r.split()[7:]) for r in _T6.strip().splitlines()),
    _T6_COLUMNS,
)
TABLE7 = _parse(_T7, COLUMNS[:10])
TABLE8 = _parse(_T8, _T8_COLUMNS)


# Datasets of this project set beside the paper's: dataset -> (the paper's dataset, caveat)
STAND_INS = {
    "mnist5k": ("mnist", "5,000 real MNIST digits, a 1,000-image test set"),
    "wordnet10": (
        "imdb",
        "WordNet noun glosses in 10 classes, an analogue of IMDB by task size and accuracy, "
        "not the same data",
    ),
    "wordnet4": (
        "agnews",
        "WordNet noun glosses in 4 classes, an analogue of AG News by its classes and "
        "accuracy, not the same data",
    ),
}


def paper_column(dataset: str, model: str) -> tuple[str, str] | None:
    """The paper's column for a subject, or None; a stand-in maps to its paper dataset's."""
    key = (STAND_INS.get(dataset, (dataset,))[0], model)
    return key if key in COLUMNS else None


# Fig. 4(b) and the Discussion: RAUC-ALL of NCIP on WikiText prompts of fine-tuned causal LMs,
# from their fine-tuning checkpoints only, "low BLEU-2 outputs" counted as failures (the
# threshold, the failure rate, K and the continuation length are not stated). (NCIP, best).
LM_FIG4B = {"GPT-2": (0.587, 0.596), "OPT-125m": (0.706, 0.706)}
