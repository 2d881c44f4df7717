"""The result columns every table and CSV shares; a module of constants, so the CLI's options load no pandas."""

ACC_COLUMNS = ("acc_all", "acc_many", "acc_medium", "acc_few")  # test accuracy: all classes, many/medium/few-shot
RESULT_COLUMNS = ("method", "dataset", "seed", "epoch", *ACC_COLUMNS)  # the leading columns of results.csv
